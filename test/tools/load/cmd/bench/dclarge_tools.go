package main

// What -dc-large (dclarge.go) runs and reads beside dirgate: ldapsearch, the DC's CPU
// from /proc, and the summary's arithmetic.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dirgate/dirgate/test/tools/load"
)

// ldapsearch runs OpenLDAP's ldapsearch as the service account, as dirgate binds,
// and returns its LDIF and CPU time.
func ldapsearch(ctx context.Context, lc load.LDAPConfig, t, group string) ([]byte, time.Duration, error) {
	args := []string{"-H", lc.URL, "-x", "-D", lc.BindDN, "-y", lc.PasswordFile, "-LLL", "-o", "ldif-wrap=no"}
	switch t {
	case dcASQ:
		// The control's value: SEQUENCE { sourceAttribute OCTET STRING "member" }.
		v := base64.StdEncoding.EncodeToString(append([]byte{0x30, 8, 0x04, 6}, "member"...))
		args = append(args, "-b", group, "-s", "base", "-E", "!1.2.840.113556.1.4.1504=::"+v, "(objectClass=*)")
	case dcPaged:
		args = append(args, "-b", lc.BaseDN, "-s", "sub", "-E", "pr=1000/noprompt", "(memberOf="+ldapEscape(group)+")")
	}
	cmd := exec.CommandContext(ctx, "ldapsearch", append(args, dcBaseAttrs...)...)
	cmd.Env = append(os.Environ(), "LDAPTLS_CACERT="+lc.CAFile, "LDAPTLS_REQCERT=demand", "LDAPCONF=/dev/null")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return nil, cpu, fmt.Errorf("ldapsearch: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	// -E pr prints "# pagedresults" comments between pages: not entries.
	return out.Bytes(), cpu, nil
}

// ldapEscape escapes a filter value (RFC 4515).
func ldapEscape(s string) string {
	r := strings.NewReplacer(`\`, `\5c`, `*`, `\2a`, `(`, `\28`, `)`, `\29`, "\x00", `\00`)
	return r.Replace(s)
}

// sessionCPU is the CPU time of every process in pid's session: samba -D calls
// setsid, so the root and all its workers share one.
func sessionCPU(pid int) (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(pid)
	var total time.Duration
	found := false
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		i := bytes.LastIndexByte(b, ')')
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 || string(f[3]) != want { // f[3] is field 6, the session
			continue
		}
		d, err := load.ProcessCPUTime(p)
		if err != nil {
			continue
		}
		total += d
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no process in the session of samba pid %d", pid)
	}
	return total, nil
}

func pidFile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("samba pid: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan()
	pid, err := strconv.Atoi(strings.TrimSpace(s.Text()))
	if err != nil {
		return 0, fmt.Errorf("samba pid in %s: %w", path, err)
	}
	return pid, nil
}

// spread prints the median and the range of v.
func spread(v []float64, digits int) string {
	if len(v) == 0 {
		return ""
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	f := "%." + strconv.Itoa(digits) + "f"
	return fmt.Sprintf(f+" ["+f+"-"+f+"]", m, s[0], s[len(s)-1])
}

func mapSlice[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}
