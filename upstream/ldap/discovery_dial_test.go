package ldap

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOpenDialsNoDCOutsideDomain: Open with Domain, its resolver answered by a DNS
// server in the test. The SRV answer names, first, a host outside the domain and,
// second, one within it; both resolve to listeners on loopback. The host outside
// must never be dialled (it would receive the service account's bind); the one
// within is, which shows the test sees dials.
func TestOpenDialsNoDCOutsideDomain(t *testing.T) {
	outside, within := countingListener(t), countingListener(t)
	dns := &fakeDNS{
		srv: map[string][]net.SRV{"_ldap._tcp.dc._msdcs.corp.example.com.": {
			{Target: "dc.attacker.example.", Port: outside.port(), Priority: 0, Weight: 100},
			{Target: "dc1.corp.example.com.", Port: within.port(), Priority: 10, Weight: 100},
		}},
		a: map[string][4]byte{"dc.attacker.example.": {127, 0, 0, 1}, "dc1.corp.example.com.": {127, 0, 0, 1}},
	}
	dir := t.TempDir()
	c := validConfig()
	c.URL, c.Domain, c.Resolver = "", "corp.example.com", dns.resolver()
	c.CAFile, c.PasswordFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "pw")
	writeCA(t, c.CAFile)
	if err := os.WriteFile(c.PasswordFile, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.DialTimeout, c.AttemptTimeout, c.RequestTimeout = time.Second, time.Second, 3*time.Second
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := c.Open(context.Background())
	if err == nil {
		d.Close()
		t.Fatal("Open succeeded against listeners that speak no LDAP")
	}
	if n := outside.accepted.Load(); n != 0 {
		t.Errorf("the host outside the domain was dialled %d times (%v)", n, err)
	}
	if within.accepted.Load() == 0 {
		t.Errorf("the DC within the domain was not dialled (%v): the test sees no dial", err)
	}

	// With only the host outside, discovery fails before any dial.
	dns.srv["_ldap._tcp.dc._msdcs.corp.example.com."] = dns.srv["_ldap._tcp.dc._msdcs.corp.example.com."][:1]
	if _, err := c.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "outside corp.example.com") {
		t.Errorf("Open with only a host outside: %v", err)
	}
	if n := outside.accepted.Load(); n != 0 {
		t.Errorf("the host outside the domain was dialled %d times", n)
	}
}

type listenerCount struct {
	l        net.Listener
	accepted atomic.Int32
}

func (c *listenerCount) port() uint16 { return uint16(c.l.Addr().(*net.TCPAddr).Port) }

// countingListener accepts connections on loopback, counts and closes them.
func countingListener(t *testing.T) *listenerCount {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &listenerCount{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			conn.Close()
		}
	}()
	return c
}

// fakeDNS answers SRV and A queries from its tables (names fully qualified,
// lower-case) over the stream connections a net.Resolver dials; any other
// question gets an empty answer. It serves the tests' own queries only.
type fakeDNS struct {
	srv map[string][]net.SRV
	a   map[string][4]byte
}

func (f *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go f.serve(server)
		return client, nil
	}}
}

// serve answers length-prefixed queries (RFC 1035 4.2.2) until the client closes.
func (f *fakeDNS) serve(c net.Conn) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		a, err := f.answer(q)
		if err != nil {
			return
		}
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(a)))); err != nil {
			return
		}
		if _, err := c.Write(a); err != nil {
			return
		}
	}
}

// answer builds the reply to query: its header and question, then one record per
// table entry, each naming the question by a pointer to offset 12.
func (f *fakeDNS) answer(q []byte) ([]byte, error) {
	if len(q) < 12 {
		return nil, errors.New("short query")
	}
	name, end, err := readName(q, 12)
	if err != nil || end+4 > len(q) {
		return nil, errors.New("bad question")
	}
	qtype := binary.BigEndian.Uint16(q[end:])
	var rrs [][]byte
	switch qtype {
	case 33: // SRV
		for _, s := range f.srv[strings.ToLower(name)] {
			rd := binary.BigEndian.AppendUint16(nil, s.Priority)
			rd = binary.BigEndian.AppendUint16(rd, s.Weight)
			rd = binary.BigEndian.AppendUint16(rd, s.Port)
			rrs = append(rrs, rr(33, appendName(rd, s.Target)))
		}
	case 1: // A
		if ip, ok := f.a[strings.ToLower(name)]; ok {
			rrs = append(rrs, rr(1, ip[:]))
		}
	}
	out := append([]byte{}, q[:2]...)       // id
	out = append(out, 0x81|q[2]&0x01, 0x80) // QR, RD copied, RA, NOERROR
	out = append(out, 0, 1, 0, byte(len(rrs)), 0, 0, 0, 0)
	out = append(out, q[12:end+4]...)
	for _, r := range rrs {
		out = append(out, r...)
	}
	return out, nil
}

func rr(typ uint16, rdata []byte) []byte {
	b := []byte{0xc0, 12} // the question's name
	b = binary.BigEndian.AppendUint16(b, typ)
	b = append(b, 0, 1, 0, 0, 0, 60) // IN, TTL 60
	b = binary.BigEndian.AppendUint16(b, uint16(len(rdata)))
	return append(b, rdata...)
}

// readName reads an uncompressed name at off and returns it with a trailing dot
// and the offset after it.
func readName(b []byte, off int) (string, int, error) {
	var labels []string
	for {
		if off >= len(b) {
			return "", 0, errors.New("name runs past the message")
		}
		n := int(b[off])
		off++
		if n == 0 {
			return strings.Join(labels, ".") + ".", off, nil
		}
		if n > 63 || off+n > len(b) {
			return "", 0, errors.New("bad label")
		}
		labels = append(labels, string(b[off:off+n]))
		off += n
	}
}

func appendName(b []byte, name string) []byte {
	for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
		b = append(b, byte(len(label)))
		b = append(b, label...)
	}
	return append(b, 0)
}
