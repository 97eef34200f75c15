package datadir

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestLockCreatesPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for path, want := range map[string]fs.FileMode{dir: DirMode, filepath.Join(dir, LockFile): FileMode} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want at most %v", path, st.Mode().Perm(), want)
		}
	}
}

func TestRestrictOldDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "wal", "00000000000000000001.log")
	snap := filepath.Join(dir, "snap", "x.snap")
	other := filepath.Join(dir, "notes.txt") // not a data file: left alone
	for _, d := range []string{filepath.Join(dir, "wal"), filepath.Join(dir, "snap")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{seg, snap, other, filepath.Join(dir, LockFile)} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f, 0o644) // regardless of the umask
	}
	os.Chmod(filepath.Join(dir, "wal"), 0o755)
	os.Chmod(filepath.Join(dir, "snap"), 0o755)
	n, err := Restrict(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Errorf("changed %d entries, want 6", n)
	}
	for _, p := range []string{dir, filepath.Join(dir, "wal"), filepath.Join(dir, "snap"), seg, snap, filepath.Join(dir, LockFile)} {
		st, _ := os.Stat(p)
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v after Restrict", p, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(other); st.Mode().Perm() != 0o644 {
		t.Errorf("unrelated file changed to %v", st.Mode().Perm())
	}
	if n, err := Restrict(dir); n != 0 || err != nil {
		t.Errorf("second Restrict: %d %v", n, err)
	}
}
