package engine

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if damageTemplate.dir != "" {
		os.RemoveAll(damageTemplate.dir)
	}
	os.Exit(code)
}
