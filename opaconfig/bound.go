package opaconfig

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"

	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
)

// DefaultMaxBundleBytes is Config.MaxBundleBytes' default: a bundle download,
// compressed, and its content, decompressed, each at most 256 KiB. OPA's own
// default (1 GiB per file, any number of files) lets one small gzip file take
// every replica's memory; and what a bundle holds is parsed into many times its
// size: up to about 500 times for Rego of many small rules, 160 times for JSON
// data of small objects (TestDenseBundleMemory, table in docs/policy.md). At
// 256 KiB the densest bundle stays near 120 MiB, within the policy's share of
// the pod's 512 Mi in deploy/kubernetes; dirgate's own policy and data are 7 KB.
const DefaultMaxBundleBytes = 256 << 10

// ErrBundleTooLarge is the error of a download that passes the bound.
var ErrBundleTooLarge = errors.New("bundle larger than the bound")

// OPA's bundle plugin bounds each file of a bundle (size_limit_bytes) but not
// their number, and reads every file into memory before the signature is checked.
// Its downloads go through the service's HTTP client, which an authentication
// plugin makes (rest.HTTPAuthPlugin): boundedAuth is that plugin for every
// service of the file. It makes the client the service's own credentials would
// make (bearer, client TLS, OAuth2, ...), and bounds each successful GET response
// as it is read: the bytes, and, for a gzip stream (a bundle), the decompressed
// bytes, counted by a decompression that runs ahead of OPA's own, so OPA never
// reads past the bound.

// authPluginName names the boundedAuth of a service among the manager's plugins.
func authPluginName(service string) string { return "dirgate_bounded_" + service }

// boundServices returns the services section with each service's credentials
// replaced by its boundedAuth plugin (the original credentials stay in the file,
// and boundedAuth reads them from there).
func boundServices(raw any) any {
	bound := func(name string, s map[string]any) map[string]any {
		cp := maps.Clone(s)
		cp["credentials"] = map[string]any{"plugin": authPluginName(name)}
		return cp
	}
	switch s := raw.(type) {
	case map[string]any:
		out := map[string]any{}
		for n, v := range s {
			if m, ok := v.(map[string]any); ok {
				out[n] = bound(n, m)
			} else {
				out[n] = v
			}
		}
		return out
	case []any:
		out := make([]any, len(s))
		for i, v := range s {
			if m, ok := v.(map[string]any); ok {
				n, _ := m["name"].(string)
				out[i] = bound(n, m)
			} else {
				out[i] = v
			}
		}
		return out
	}
	return raw
}

// boundedAuth is one service's authentication plugin: the service's own
// credentials, and the bound on what its responses may hold.
type boundedAuth struct {
	manager     *plugins.Manager
	name        string
	credentials []byte // the service's credentials section, as JSON
	limit       int64

	mu    sync.Mutex
	inner rest.HTTPAuthPlugin
}

func registerBoundedAuth(m *plugins.Manager, services map[string]map[string]any, limit int64) error {
	for n, s := range services {
		creds, err := json.Marshal(s["credentials"])
		if err != nil {
			return fmt.Errorf("opa config: service %s: credentials: %w", n, err)
		}
		m.Register(authPluginName(n), &boundedAuth{manager: m, name: authPluginName(n), credentials: creds, limit: limit})
	}
	return nil
}

// NewClient makes the client the service's credentials would make, its
// transport bounded.
func (a *boundedAuth) NewClient(c rest.Config) (*http.Client, error) {
	orig := c
	orig.Credentials.Plugin = nil
	if string(a.credentials) != "null" {
		if err := json.Unmarshal(a.credentials, &orig.Credentials); err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
	}
	inner, err := orig.AuthPlugin(nil)
	if err != nil {
		return nil, err
	}
	hc, err := inner.NewClient(orig)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.inner = inner
	a.mu.Unlock()
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp := *hc
	cp.Transport = boundedTransport{base: base, limit: a.limit}
	return &cp, nil
}

// Prepare adds the service's credentials to a request.
func (a *boundedAuth) Prepare(r *http.Request) error {
	a.mu.Lock()
	inner := a.inner
	a.mu.Unlock()
	if inner == nil {
		return errors.New("opa config: credentials used before the client was made")
	}
	return inner.Prepare(r)
}

func (a *boundedAuth) Start(context.Context) error {
	a.manager.UpdatePluginStatus(a.name, &plugins.Status{State: plugins.StateOK})
	return nil
}
func (a *boundedAuth) Stop(context.Context)             {}
func (a *boundedAuth) Reconfigure(context.Context, any) {}

// boundedTransport bounds the body of every successful GET: the requests that
// download bundles (status reports and decision uploads are POSTs).
type boundedTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return resp, err
	}
	resp.Body = newBoundedBody(resp.Body, t.limit)
	resp.ContentLength = -1
	return resp, nil
}

// boundedBody reads a response body for OPA, failing with ErrBundleTooLarge once
// more than limit bytes have been read or, for a gzip stream, once its content
// passes limit bytes. The gzip stream is decompressed here first (the output
// counted and dropped) and OPA is given only the compressed bytes this
// decompression has consumed: OPA's own decompression is never ahead of the
// count.
type boundedBody struct {
	body  io.ReadCloser
	src   *bufio.Reader
	limit int64

	started bool
	zr      *gzip.Reader // nil: not a gzip stream, passed through
	zdone   bool
	pending []byte // consumed by zr; pending[off:] is not yet given to OPA
	off     int
	raw     int64 // bytes read from the body
	out     int64 // decompressed bytes
	scratch []byte
	err     error
}

func newBoundedBody(body io.ReadCloser, limit int64) *boundedBody {
	return &boundedBody{body: body, src: bufio.NewReader(body), limit: limit}
}

func (b *boundedBody) tooLarge(what string) error {
	return fmt.Errorf("%w: %s exceeds %d bytes (DIRGATE_OPA_BUNDLE_MAX_BYTES)", ErrBundleTooLarge, what, b.limit)
}

// ReadByte and consumed make the body a flate.Reader for zr, so that gzip reads
// it byte by byte, without a buffer of its own running ahead.
// Past the bound they fail, so that input that decompresses to nothing (empty
// blocks, empty gzip members) cannot pile up in pending within one zr.Read.
func (b *boundedBody) ReadByte() (byte, error) {
	if b.raw > b.limit {
		return 0, b.tooLarge("the download")
	}
	c, err := b.src.ReadByte()
	if err == nil {
		b.consumed([]byte{c})
	}
	return c, err
}

// zsrc is what zr reads: the body, each byte kept for OPA.
type zsrc struct{ b *boundedBody }

func (z zsrc) ReadByte() (byte, error) { return z.b.ReadByte() }
func (z zsrc) Read(p []byte) (int, error) {
	room := z.b.limit + 1 - z.b.raw
	if room <= 0 {
		return 0, z.b.tooLarge("the download")
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := z.b.src.Read(p)
	z.b.consumed(p[:n])
	return n, err
}

func (b *boundedBody) consumed(p []byte) {
	b.raw += int64(len(p))
	b.pending = append(b.pending, p...)
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.started {
		b.started = true
		if head, _ := b.src.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
			zr, err := gzip.NewReader(zsrc{b})
			if err != nil {
				b.err = fmt.Errorf("bundle: %w", err)
				return 0, b.err
			}
			b.zr = zr
			b.scratch = make([]byte, 32<<10)
		}
	}
	if b.zr == nil {
		n, err := b.src.Read(p)
		b.raw += int64(n)
		if b.raw > b.limit {
			b.err = b.tooLarge("the download")
			return 0, b.err
		}
		return n, err
	}
	for b.off == len(b.pending) && !b.zdone {
		n, err := b.zr.Read(b.scratch)
		b.out += int64(n)
		switch {
		case b.out > b.limit:
			b.err = b.tooLarge("the bundle's decompressed content")
			return 0, b.err
		case err == io.EOF:
			b.zdone = true
		case errors.Is(err, ErrBundleTooLarge):
			b.err = err
			return 0, b.err
		case err != nil:
			b.err = fmt.Errorf("bundle: %w", err)
			return 0, b.err
		}
	}
	if b.raw > b.limit {
		b.err = b.tooLarge("the download")
		return 0, b.err
	}
	if b.off == len(b.pending) {
		return 0, io.EOF
	}
	n := copy(p, b.pending[b.off:])
	b.off += n
	if b.off == len(b.pending) {
		b.pending, b.off = b.pending[:0], 0
	}
	return n, nil
}

func (b *boundedBody) Close() error { return b.body.Close() }
