package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/chronoq/chronoq/internal/datadir"
)

// List returns the snapshots in dir whose footer is intact, newest (highest
// position) first. Only the footer is checked; Open verifies the rest.
// Temporary files left by interrupted writers are removed (not those of
// writers still running in this process). A missing dir has no snapshots.
func List(dir string) ([]Info, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: list %s: %w", dir, err)
	}
	var out []Info
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.Contains(name, tmpMarker) {
			if _, busy := writing.Load(path); !busy {
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("snapshot: remove stale %s: %w", path, err)
				}
			}
			continue
		}
		if _, ok := parseName(name); !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := stat(path)
		if err != nil {
			continue // damaged: not a candidate
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int {
		switch {
		case b.Pos.Less(a.Pos):
			return -1
		case a.Pos.Less(b.Pos):
			return 1
		}
		return 0
	})
	return out, nil
}

func stat(path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	ft, size, err := readFooter(f, path)
	if err != nil {
		return Info{}, err
	}
	return Info{Path: path, Pos: ft.pos, Items: ft.items, Size: size}, nil
}

// Prune keeps the newest keep snapshots in dir and deletes older ones,
// including damaged snapshot files older than the oldest one kept.
func Prune(dir string, keep int) error {
	retired, err := Retire(dir, keep)
	if err != nil {
		return err
	}
	return RemoveRetired(retired)
}

// retiredSuffix marks a snapshot file Retire took out of the list.
const retiredSuffix = ".retired"

// Retire does what Prune does in two steps, so that a caller with latency
// to keep can leave the slow one to another goroutine. Retire renames the
// files Prune would delete out of List's sight and answers their new
// paths; RemoveRetired deletes them. Unlinking a snapshot file of
// hundreds of megabytes takes hundreds of milliseconds on ext4 (201 ms for
// 700 MB here, docs/benchmarks.md). The renames are not synced: after a
// crash an undone one is an older snapshot, retired again by the next
// Retire, and a retired file left behind is deleted by RemoveLeftovers.
func Retire(dir string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("snapshot: pruning must keep at least one snapshot, not %d", keep)
	}
	infos, err := List(dir)
	if err != nil {
		return nil, err
	}
	if len(infos) <= keep {
		return nil, nil
	}
	oldestKept := infos[keep-1].Pos
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: list %s: %w", dir, err)
	}
	var retired []string
	for _, e := range entries {
		pos, ok := parseName(e.Name())
		if !ok || !pos.Less(oldestKept) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Rename(path, path+retiredSuffix); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return retired, fmt.Errorf("snapshot: retire %s: %w", path, err)
		}
		retired = append(retired, path+retiredSuffix)
	}
	return retired, nil
}

// RemoveRetired deletes files Retire answered.
func RemoveRetired(paths []string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("snapshot: remove %s: %w", p, err)
		}
	}
	if len(paths) > 0 {
		if err := datadir.SyncDir(filepath.Dir(paths[0])); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	return nil
}

// RemoveLeftovers deletes the retired snapshot files a crash left in dir
// before RemoveRetired ran.
func RemoveLeftovers(dir string) error {
	left, err := filepath.Glob(filepath.Join(dir, "*"+retiredSuffix))
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return RemoveRetired(left)
}
