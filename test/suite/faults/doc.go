// Package faults holds dirgate's fault tests (Redis killed under
// load, the domain controller down, a slow and cutting upstream, a soak run). They
// run the real binary as a child process (test/harness/child), make the faults with
// test/harness/faultproxy, and count what each fault costs the requests sent meanwhile
// (load_test.go's Tally). test/suite/faults/README.md lists them with what they assert.
package faults
