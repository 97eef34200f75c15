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
	if keep < 1 {
		return fmt.Errorf("snapshot: Prune must keep at least one snapshot, not %d", keep)
	}
	infos, err := List(dir)
	if err != nil {
		return err
	}
	if len(infos) <= keep {
		return nil
	}
	oldestKept := infos[keep-1].Pos
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("snapshot: list %s: %w", dir, err)
	}
	removed := 0
	for _, e := range entries {
		pos, ok := parseName(e.Name())
		if !ok || !pos.Less(oldestKept) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("snapshot: remove %s: %w", path, err)
		}
		removed++
	}
	if removed > 0 {
		if err := datadir.SyncDir(dir); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	return nil
}
