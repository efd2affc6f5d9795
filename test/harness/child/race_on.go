//go:build race

package child

// raceEnabled builds the program under test with the race detector too.
const raceEnabled = true
