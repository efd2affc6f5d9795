package ldap

import (
	"testing"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/test/harness/fixture"
	"github.com/dirgate/dirgate/test/harness/sambatest"
	"github.com/dirgate/dirgate/test/suite/conformance"
	"github.com/dirgate/dirgate/upstream/breaker"
)

// TestConformance runs the suite every Directory passes against the Samba DC seeded
// with the large fixture, through the circuit breaker as cmd/dirgate wires it.
//
// The suite removes fixture.RemoveTargetDN and fixture.ConcurrentTargetDN once per
// run; the cleanup puts them back as the administrator so the DC can serve the next
// run without reseeding.
func TestConformance(t *testing.T) {
	dc := sambatest.Env(t)
	if dc.FixtureDir == "" {
		t.Fatal("the DC was seeded without the fixture (test/harness/fixture/testdata); the suite needs it")
	}
	d := openDC(t, dcConfig(dc))
	t.Cleanup(func() {
		addMember(t, dc, fixture.RemovalDN, fixture.RemoveTargetDN)
		addMember(t, dc, fixture.ConcurrentRemovalDN, fixture.ConcurrentTargetDN)
	})
	var dir dirgate.Directory = breaker.New(d, breaker.Settings{Name: "ldap"})
	conformance.Run(t, func(*testing.T) dirgate.Directory { return dir }, fixture.Large())
}

// TestConformancePair runs the same suite against the two replicating DCs of
// test/harness/samba/pair.sh, both named in the URL list as a deployment names its DCs. The
// pair must hold the fixture: make test starts it so; by hand,
// DIRGATE_PAIR_FIXTURE=1 bash test/harness/samba/pair.sh start /tmp/dirgate-pair.
func TestConformancePair(t *testing.T) {
	pair := sambatest.PairFromEnv(t)
	if pair.FixtureDir == "" {
		t.Fatal("the pair was seeded without the fixture (test/harness/fixture/testdata); the suite needs it")
	}
	dc := pair.DC(1)
	d := openDC(t, pairConfig(pair))
	t.Cleanup(func() {
		addMember(t, dc, fixture.RemovalDN, fixture.RemoveTargetDN)
		addMember(t, dc, fixture.ConcurrentRemovalDN, fixture.ConcurrentTargetDN)
	})
	var dir dirgate.Directory = breaker.New(d, breaker.Settings{Name: "ldap", TelemetryOnly: true})
	conformance.Run(t, func(*testing.T) dirgate.Directory { return dir }, fixture.Large())
}
