package failover

import (
	"os"
	"testing"

	"github.com/dirgate/dirgate/test/child"
)

func TestMain(m *testing.M) { os.Exit(child.Main(m)) }
