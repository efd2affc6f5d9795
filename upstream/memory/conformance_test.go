package memory_test

import (
	"os"
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/suite/conformance"
	"github.com/dirgate/dirgate/upstream/memory"
)

// The memory upstream passes the conformance suite on the large fixture, each
// mutating test on a fresh load.
func TestConformanceLarge(t *testing.T) {
	data, err := os.ReadFile("../../" + fixture.FixtureLDIFPath)
	if err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, func(t *testing.T) dirgate.Directory {
		d, err := memory.Load("fixture.ldif", data)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, fixture.Large())
}

// The embedded demo is the same organisation at demo scale: the suite holds there too.
func TestConformanceDemo(t *testing.T) {
	conformance.Run(t, func(t *testing.T) dirgate.Directory {
		d, err := memory.Demo()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, fixture.Demo())
}
