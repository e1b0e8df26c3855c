package engine

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckReportPrint pins what Check prints (docket verify's output) for
// a sound directory, a torn log tail, a corrupt log and a damaged snapshot,
// against testdata/checkprint: a change of the report's types must not
// change a line of it.
func TestCheckReportPrint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"sound", func(*testing.T, string) {}},
		{"torn", func(t *testing.T, dir string) {
			seg := filepath.Join(dir, "wal", "00000000000000000001")
			st, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(seg, st.Size()-2); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt", func(t *testing.T, dir string) {
			// Without the snapshot the whole log is needed.
			snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
			for _, s := range snaps {
				os.Remove(s)
			}
			flip(t, filepath.Join(dir, "wal", "00000000000000000001"), 3)
		}},
		{"badsnap", func(t *testing.T, dir string) {
			snaps, _ := filepath.Glob(filepath.Join(dir, "snap", "*.snap"))
			flip(t, snaps[0], 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, filepath.Join("testdata", "v5dir"))
			tc.damage(t, dir)
			rep, _ := Check(dir)
			var out strings.Builder
			rep.Print(&out)
			got := strings.ReplaceAll(out.String(), dir, "DIR")
			golden := filepath.Join("testdata", "checkprint", tc.name+".txt")
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("Check printed\n%s\nwant (%s)\n%s", got, golden, want)
			}
		})
	}
}

// flip changes a bit of the byte at 1/at of file's length.
func flip(t *testing.T, file string, at int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/at] ^= 0x01
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the files under src to a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
