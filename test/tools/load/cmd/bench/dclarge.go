package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"log/slog"

	"github.com/dirgate/dirgate"
	"github.com/dirgate/dirgate/policy"
	"github.com/dirgate/dirgate/test/tools/load"
	"github.com/dirgate/dirgate/upstream/ldap"
)

// The first listings of large groups on a domain controller (-dc-large): the groups
// test/harness/samba/large.sh seeds (DIRGATE_LARGE_SIZES, DIRGATE_LARGE_OU), each
// listed once by a dirgate that has never listed it (a cache miss: the LDAP upstream
// reads it), against ldapsearch fetching the same members with the same attributes,
// alternated repetition by repetition. What each costs: wall time, the DC's CPU
// (every samba process of its session, from /proc), dirgate's CPU and the client's.

// dcBaseAttrs are the attributes dirgate's LDAP upstream asks for every member
// (upstream/ldap baseAttrs): ldapsearch asks for the same.
var dcBaseAttrs = []string{
	"objectGUID", "objectSid", "objectClass", "userAccountControl",
	"msDS-User-Account-Control-Computed", "accountExpires", "pwdLastSet",
	"msDS-UserPasswordExpiryTimeComputed", "primaryGroupID",
}

// The targets of a -dc-large run.
const (
	dcDirgate = "dirgate"
	// dcASQ is ldapsearch with the ASQ control on the group's member attribute: the
	// search dirgate sends, and the one request that returns exactly the members.
	dcASQ = "ldapsearch-asq"
	// dcPaged is ldapsearch's paged subtree search for (memberOf=<group>), 1,000 a
	// page: what a client without ASQ sends.
	dcPaged = "ldapsearch-paged"
)

// dcRun is one first listing.
type dcRun struct {
	Members    int           `json:"members"`
	Target     string        `json:"target"`
	Repetition int           `json:"repetition"`
	Wall       time.Duration `json:"wallNs"`
	DCCPU      time.Duration `json:"dcCpuNs"`
	DirgateCPU time.Duration `json:"dirgateCpuNs"`
	ClientCPU  time.Duration `json:"clientCpuNs"`
	Entries    int           `json:"entries"`
	Bytes      int           `json:"bytes"`
	Failed     string        `json:"failed,omitempty"`
}

// runDCLarge measures the first listing of each large group, -repeat times.
func runDCLarge(ctx context.Context, o options, stdout io.Writer) error {
	lc, err := load.LDAPConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	ou, samba := os.Getenv("DIRGATE_LARGE_OU"), os.Getenv("DIRGATE_TEST_SAMBA_DIR")
	spec := o.dcLarge
	if spec == "env" {
		spec = os.Getenv("DIRGATE_LARGE_SIZES")
	}
	sizes, err := parseMembers(spec)
	if err != nil || ou == "" || samba == "" {
		return fmt.Errorf("-dc-large needs the env file test/harness/samba/large.sh writes (DIRGATE_LARGE_OU, DIRGATE_LARGE_SIZES, DIRGATE_TEST_SAMBA_DIR): %v", err)
	}
	dcPID, err := pidFile(filepath.Join(samba, "run", "samba.pid"))
	if err != nil {
		return err
	}
	work, policyDir, done, err := workDir("dirgate-bench-dclarge-", o.keep, stdout)
	if err != nil {
		return err
	}
	defer done()
	if err := os.WriteFile(filepath.Join(policyDir, "authz.rego"), []byte(allowAll), 0o600); err != nil {
		return err
	}
	callers := []load.Caller{{Name: "admin", Subject: lc.AdminDN}}
	tokens := filepath.Join(work, "tokens.yaml")
	if err := writeTokens(tokens, callers); err != nil {
		return err
	}
	group := func(n int) string { return "CN=dirgate-large-" + strconv.Itoa(n) + "," + ou }
	// A small group listed first by every dirgate: its connections, the caller's
	// principal and the policy are then warm, and what the large listing costs is the
	// listing's own.
	warm := "CN=Domain Admins,CN=Users," + lc.BaseDN
	w := load.Workload{Callers: callers}
	for _, g := range append([]string{warm}, mapSlice(sizes, group)...) {
		w.Ops = append(w.Ops, load.Op{Name: g, Kind: load.OpList, Query: load.Query{Group: g}, Weight: 1})
	}
	// dirgate's default timeouts (10 s an LDAP call, 30 s a request) are shorter than
	// Samba takes to answer the ASQ search of a 20,000-member group on a loaded
	// machine (20-36 s measured with ldapsearch): the runs give it as long as
	// ldapsearch gets.
	if o.dirgateEnv == nil {
		o.dirgateEnv = map[string]string{}
	}
	for _, k := range []string{"DIRGATE_LDAP_TIMEOUT", "DIRGATE_REQUEST_TIMEOUT"} {
		if o.dirgateEnv[k] == "" {
			o.dirgateEnv[k] = dcTimeout.String()
		}
	}
	checker, err := dcExpect(ctx, lc, policyDir, w)
	if err != nil {
		return err
	}
	env := machine()
	env.Cache = "in process, a new dirgate each repetition (every listing measured is a miss)"
	env.print(stdout)
	o.redis = "off"

	var runs []dcRun
	for rep := range o.repeat {
		dg, err := startDirgate(ctx, filepath.Join(work, "dirgate-"+strconv.Itoa(rep)), o.bin, o.dirgateEnv, o, lc, policyDir, tokens)
		if err != nil {
			return err
		}
		o.bin = dg.bin // built once
		if _, _, err := getListing(ctx, dg.url, callers[0].Token, w.Ops[0].Query); err != nil {
			dg.stop()
			return fmt.Errorf("warm-up listing: %w", err)
		}
		for i, n := range sizes {
			op := w.Ops[i+1]
			for _, t := range rotate([]string{dcDirgate, dcASQ, dcPaged}, rep) {
				r, err := dcMeasure(ctx, t, dg, dcPID, lc, callers[0].Token, op.Query, checker)
				r.Members, r.Target, r.Repetition = n, t, rep
				if err == nil && r.Entries != n {
					err = fmt.Errorf("%d entries", r.Entries)
				}
				if err != nil {
					// Counted and left out of the medians: a timeout on a loaded
					// machine is a result too.
					r.Failed = err.Error()
					runs = append(runs, r)
					fmt.Fprintf(stdout, "rep %d  %6d members  %-16s  FAILED after %s: %v\n", rep, n, t, r.Wall.Round(time.Millisecond), err)
					continue
				}
				runs = append(runs, r)
				fmt.Fprintf(stdout, "rep %d  %6d members  %-16s  wall %8s  DC CPU %8s  dirgate CPU %8s  client CPU %8s  %d KB\n",
					rep, n, t, r.Wall.Round(time.Millisecond), r.DCCPU, r.DirgateCPU, r.ClientCPU, r.Bytes>>10)
			}
		}
		dg.stop()
	}
	fmt.Fprintf(stdout, "\nmedians [min-max] of %d repetitions; ratio: dirgate's wall over ldapsearch-asq's, paired by repetition\n", o.repeat)
	fmt.Fprintln(stdout, "members  target            wall s               DC CPU s             dirgate CPU s        client CPU s         wall ratio")
	for _, n := range sizes {
		for _, t := range []string{dcDirgate, dcASQ, dcPaged} {
			sel := slices.DeleteFunc(slices.Clone(runs), func(r dcRun) bool { return r.Members != n || r.Target != t || r.Failed != "" })
			ratio := ""
			if t != dcASQ {
				var rs []float64
				for _, r := range sel {
					for _, b := range runs {
						if b.Members == n && b.Target == dcASQ && b.Repetition == r.Repetition && b.Failed == "" && b.Wall > 0 {
							rs = append(rs, float64(r.Wall)/float64(b.Wall))
						}
					}
				}
				ratio = spread(rs, 2)
			}
			get := func(f func(dcRun) time.Duration) string {
				var v []float64
				for _, r := range sel {
					v = append(v, f(r).Seconds())
				}
				return spread(v, 3)
			}
			failed := 0
			for _, r := range runs {
				if r.Members == n && r.Target == t && r.Failed != "" {
					failed++
				}
			}
			if failed > 0 {
				ratio += fmt.Sprintf("  (%d failed, left out)", failed)
			}
			fmt.Fprintf(stdout, "%7d  %-16s  %-19s  %-19s  %-19s  %-19s  %s\n", n, t,
				get(func(r dcRun) time.Duration { return r.Wall }), get(func(r dcRun) time.Duration { return r.DCCPU }),
				get(func(r dcRun) time.Duration { return r.DirgateCPU }), get(func(r dcRun) time.Duration { return r.ClientCPU }), ratio)
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stdout, "load average at the end: %s\n", strings.Join(strings.Fields(string(b))[:3], " "))
	}
	if o.jsonFile != "" {
		b, err := json.MarshalIndent(map[string]any{"machine": env, "options": o.public(), "runs": runs}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.jsonFile, b, 0o644)
	}
	return nil
}

// dcTimeout bounds every listing of a -dc-large run.
const dcTimeout = 5 * time.Minute

// dcExpect is expect with dcTimeout for the reference's reads.
func dcExpect(ctx context.Context, lc load.LDAPConfig, policyDir string, w load.Workload) (*load.Checker, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := ldap.Config{URL: lc.URL, BindDN: lc.BindDN, PasswordFile: lc.PasswordFile, BaseDN: lc.BaseDN,
		CAFile: lc.CAFile, RequestTimeout: dcTimeout}.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer d.Close()
	authz, err := policy.Open(ctx, policy.Config{Dir: policyDir, Logger: quiet, DecisionLog: discardedLines()})
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer authz.Close()
	return load.Expect(ctx, &dirgate.MemberService{Dir: d, Authz: authz}, w)
}

// dcMeasure lists q once through target t and reads what it cost.
func dcMeasure(ctx context.Context, t string, dg *dirgateProc, dcPID int, lc load.LDAPConfig, token string, q load.Query, checker *load.Checker) (dcRun, error) {
	var r dcRun
	dc0, err := sessionCPU(dcPID)
	if err != nil {
		return r, err
	}
	dgPID := dg.cmd.Process.Pid
	dg0, err := load.ProcessCPUTime(dgPID)
	if err != nil {
		return r, err
	}
	self0, err := load.ProcessCPUTime(0)
	if err != nil {
		return r, err
	}
	start := time.Now()
	var body []byte
	switch t {
	case dcDirgate:
		var status int
		body, status, err = getListing(ctx, dg.url, token, q)
		r.Wall = time.Since(start)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d: %.200q", status, body)
		}
	default:
		var cpu time.Duration
		body, cpu, err = ldapsearch(ctx, lc, t, q.Group)
		r.Wall, r.ClientCPU = time.Since(start), cpu
	}
	if err != nil {
		return r, err
	}
	dc1, err := sessionCPU(dcPID)
	if err != nil {
		return r, err
	}
	dg1, err := load.ProcessCPUTime(dgPID)
	if err != nil {
		return r, err
	}
	self1, err := load.ProcessCPUTime(0)
	if err != nil {
		return r, err
	}
	r.DCCPU, r.DirgateCPU, r.Bytes = dc1-dc0, dg1-dg0, len(body)
	if t == dcDirgate {
		r.ClientCPU = self1 - self0 // the HTTP client: reading the body, not checking it
		if wrong := checker.CheckListing(0, q, nil, body); wrong != "" {
			return r, fmt.Errorf("wrong answer: %s", wrong)
		}
		var objs []json.RawMessage
		if err := json.Unmarshal(body, &objs); err != nil {
			return r, err
		}
		r.Entries = len(objs)
	} else {
		r.Entries = bytes.Count(body, []byte("\ndn: ")) + bytes.Count(body, []byte("\ndn:: "))
		if bytes.HasPrefix(body, []byte("dn:")) {
			r.Entries++
		}
	}
	return r, nil
}

// getListing sends one listing request on a connection of its own.
func getListing(ctx context.Context, url, token string, q load.Query) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?"+q.RawQuery(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set(load.TokenHeader, token)
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: dcTimeout}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}
