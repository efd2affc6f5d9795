package changefeed

import (
	"log/slog"
	"testing"
	"time"

	"github.com/dirgate/dirgate/internal/seal"
)

// Values an earlier dirgate wrote, byte for byte, under goldenSecret with the key
// prefix "p:": a replica of this version must read them and write the same, since
// a rolling upgrade mixes versions while a claim, a position and events live
// (internal/seal). Read as foreign, an earlier leader's claim would be taken over
// and its events would drop everything on every follower.
const (
	goldenSecret = "golden secret of at least 32 bytes, for tests"
	goldenClaim  = "instance-1|4102444800000|01774664e5b5c28bc46755cc45dd7de8a7913116ed073d83ab86801a8ddc3dfa"
	goldenPos    = "h1\xad\xe2\x12\xc1\xdaC\x16s}\xb4\x96 \x13\xf3\xad\x8eʡ\xbc\xbeRAn\x0f\xb0a3\xce\xf27\x13\xd9{\"x\":1}"
	goldenMAC    = "184b8bd403279e1de73c3b97d7b86a462d2b34cb3f15c8ca7ab3027d37a2cc9c"
	goldenGUID   = "73e0a89b-84f0-4f42-8cbd-40e4e51f1673"
)

// TestSealedFormatUnchanged: the claim, the position and an event's HMAC are the
// bytes an earlier dirgate wrote, and its values verify; moved under another key
// or altered, they are refused as before.
func TestSealedFormatUnchanged(t *testing.T) {
	now := func() time.Time { return time.UnixMilli(4102444800000 - 1000) }
	f := newRedisFeed(nil, "p:", seal.New([]byte(goldenSecret)), slog.New(slog.DiscardHandler), now)
	if c := f.claim("instance-1", time.UnixMilli(4102444800000)); c != goldenClaim {
		t.Errorf("claim %q, want %q", c, goldenClaim)
	}
	if !f.claimLive(goldenClaim) {
		t.Errorf("an earlier claim is not live")
	}
	if f.claimLive("instance-2" + goldenClaim[len("instance-1"):]) {
		t.Errorf("a claim with another instance id is live")
	}
	other := newRedisFeed(nil, "q:", seal.New([]byte(goldenSecret)), slog.New(slog.DiscardHandler), now)
	if other.claimLive(goldenClaim) {
		t.Errorf("a claim moved to another prefix's key is live")
	}
	if p := f.seal.Seal(f.pos, `{"x":1}`); p != goldenPos {
		t.Errorf("position %q, want %q", p, goldenPos)
	}
	if _, err := other.seal.Open(other.pos, goldenPos); err == nil {
		t.Errorf("a position moved to another prefix's key opens")
	}
	body := eventBody("7", "4102444800000", "0", "1", goldenGUID)
	if m := f.seal.HexMAC(f.events, body); m != goldenMAC {
		t.Errorf("event HMAC %q, want %q", m, goldenMAC)
	}
	ev := map[string]any{"seq": "7", "t": "4102444800000", "all": "0", "groups": "1", "guids": goldenGUID, "mac": goldenMAC}
	if e := f.parseEvent("1-0", ev); e.refused != "" || e.ev.All || len(e.ev.GUIDs) != 1 {
		t.Errorf("an earlier event: %+v", e)
	}
	if e := other.parseEvent("1-0", ev); e.refused == "" || !e.ev.All {
		t.Errorf("an event moved to another prefix's stream: %+v", e)
	}
	ev["guids"] = "00000000-0000-0000-0000-000000000001"
	if e := f.parseEvent("1-0", ev); e.refused == "" || !e.ev.All {
		t.Errorf("an altered event: %+v", e)
	}
}
