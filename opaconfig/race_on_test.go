//go:build race

package opaconfig_test

// raceDetector: the race detector about doubles what is resident.
const raceDetector = true
