//go:build race

package fuzz

// raceEnabled scales the sweeps down under the race detector, which makes
// every open of a directory several times slower.
const raceEnabled = true
