package objectjson_test

import (
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/internal/objectjson"
)

// TestTimestampLayout: the encoder writes timestamps in the domain's layout.
func TestTimestampLayout(t *testing.T) {
	if objectjson.TimestampLayout != dirgate.TimestampLayout {
		t.Fatalf("objectjson.TimestampLayout %q, dirgate.TimestampLayout %q", objectjson.TimestampLayout, dirgate.TimestampLayout)
	}
}
