package proxy_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/dirgate/dirgate/proxy"
)

// TestIdleAfterLastRequest: Config.Idle is called when a request has been logged and
// no other is in flight, and not while another is.
func TestIdleAfterLastRequest(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var idle []int // lines logged at each call
	var e *env
	e = newEnv(t, func(c *proxy.Config) {
		c.Mounts = map[string]http.Handler{"/slow": http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			close(entered)
			<-release
		})}
		c.Idle = func() {
			mu.Lock()
			defer mu.Unlock()
			idle = append(idle, bytes.Count(e.log.Bytes(), []byte("\n")))
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() { e.serve(httptest.NewRequest(http.MethodGet, "/slow", nil)) })
	<-entered
	if w := e.do(http.MethodGet, listURL, nil); w.Code != http.StatusOK {
		t.Fatalf("listing: status %d", w.Code)
	}
	mu.Lock()
	if len(idle) != 0 {
		t.Errorf("Idle called %d times while a request was in flight", len(idle))
	}
	mu.Unlock()
	close(release)
	wg.Wait()
	if len(idle) != 1 || idle[0] != 2 {
		t.Fatalf("Idle calls %v: want one, after both requests' log lines", idle)
	}
}
