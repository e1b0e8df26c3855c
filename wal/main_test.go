package wal

import (
	"testing"

	"github.com/docketdb/docket/internal/testrun"
)

// TestMain keeps the scratch directories of a -short run in memory
// (testrun.ShortScratch); the full run writes them to the disk.
func TestMain(m *testing.M) { testrun.Run(m) }
