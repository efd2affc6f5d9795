package proxy

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/dirgate/dirgate"
)

// TestIdentifierCache: a cached identifier is the one parsing gives, bad input is
// refused every time and never kept, and the cache stays bounded under distinct values
// from many goroutines.
func TestIdentifierCache(t *testing.T) {
	var c identifierCache
	for _, v := range []string{"CN=Group,OU=X,DC=example,DC=org", "cn=group,ou=x,dc=EXAMPLE,dc=org", "{0f8fad5b-d9cb-469f-a165-70867728950e}", "S-1-5-21-1-2-3-500"} {
		want, err := dirgate.ParseIdentifier(v)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := c.parse(v)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("parse(%q) = %+v, %v; want %+v", v, got, err, want)
			}
		}
	}
	for range 2 {
		if _, err := c.parse("CN=bad\x01,DC=x"); err == nil {
			t.Fatal("a control character was accepted")
		}
	}
	if _, ok := c.m.Load().ids.Load("CN=bad\x01,DC=x"); ok {
		t.Fatal("bad input was cached")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3 * maxCachedIdentifiers / 4 {
				v := fmt.Sprintf("CN=g%d-%d,DC=x", g, i)
				id, err := c.parse(v)
				if err != nil || id.Canonical() == "" {
					t.Errorf("parse(%q) = %v", v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := c.m.Load().n.Load(); n > maxCachedIdentifiers {
		t.Fatalf("%d identifiers cached, bound %d", n, maxCachedIdentifiers)
	}
}
