//go:build race

package faults

// raceEnabled builds the program under test with the race detector too.
const raceEnabled = true
