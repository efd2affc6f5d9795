package failover

import (
	"os"
	"testing"

	"github.com/dirgate/dirgate/test/harness/child"
)

func TestMain(m *testing.M) { os.Exit(child.Main(m)) }
