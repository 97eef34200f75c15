package broker

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/datadir"
	"github.com/chronoq/chronoq/internal/farstore"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// A backup on disk (the directory `chronoq backup` writes) is laid out as
// a data directory plus a manifest:
//
//	DIR/MANIFEST.json           what is in the backup, with checksums
//	DIR/snap/<pos>.snap         the snapshot (internal/snapshot/format.go)
//	DIR/wal/<n>.log             the log segments, the last cut at Cut
//	DIR/far/<start>[.<g>].bkt   far-future bucket files, each cut at the
//	                            size the snapshot records (far.go)
//
// Over the wire (POST /admin/backup) it is a tar stream of the same files,
// the manifest last: its checksums are computed while the files stream.
// Each file has a SHA-256 and a CRC-32C per BackupBlock bytes, so damage
// is reported with the file and the offset of the block it is in.

// BackupManifestName is the manifest's file name in a backup directory.
const BackupManifestName = "MANIFEST.json"

// BackupBlock is the span of one block checksum in the manifest.
const BackupBlock = 1 << 20

// BackupFormat names the manifest format; BackupVersion is its version.
const (
	BackupFormat  = "chronoq-backup"
	BackupVersion = 1
)

// BackupManifest describes a backup.
type BackupManifest struct {
	Format  string       `json:"format"`
	Version int          `json:"version"`
	Created time.Time    `json:"created"`
	Start   wal.Position `json:"start"` // the snapshot's replay position
	// Cut: the backup holds exactly the changes logged before this
	// position, which include every change acknowledged before the
	// backup was requested.
	Cut   wal.Position `json:"cut"`
	Jobs  int          `json:"jobs"`
	Files []BackupFile `json:"files"`
}

// BackupFile is one file of a backup.
type BackupFile struct {
	Path   string   `json:"path"` // slash-separated, relative to the backup
	Size   int64    `json:"size"`
	SHA256 string   `json:"sha256"`
	Blocks []uint32 `json:"block_crc32c"` // CRC-32C of each BackupBlock bytes
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// fileSum computes a BackupFile's checksums from the bytes written to it.
type fileSum struct {
	sha    hash.Hash
	blocks []uint32
	cur    uint32
	inBlk  int
	size   int64
}

func newFileSum() *fileSum { return &fileSum{sha: sha256.New()} }

func (s *fileSum) Write(p []byte) (int, error) {
	n := len(p)
	s.sha.Write(p)
	s.size += int64(n)
	for len(p) > 0 {
		k := min(len(p), BackupBlock-s.inBlk)
		s.cur = crc32.Update(s.cur, crcTable, p[:k])
		s.inBlk += k
		p = p[k:]
		if s.inBlk == BackupBlock {
			s.blocks = append(s.blocks, s.cur)
			s.cur, s.inBlk = 0, 0
		}
	}
	return n, nil
}

func (s *fileSum) file(name string) BackupFile {
	blocks := s.blocks
	if s.inBlk > 0 {
		blocks = append(blocks, s.cur)
	}
	return BackupFile{Path: name, Size: s.size, SHA256: hex.EncodeToString(s.sha.Sum(nil)), Blocks: blocks}
}

// segmentName is a log segment's file name (internal/wal/format.go).
func segmentName(n uint32) string { return fmt.Sprintf("%020d.log", n) }

// WriteTo streams the backup to w as a tar archive, manifest last.
func (s *BackupSet) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	m := BackupManifest{Format: BackupFormat, Version: BackupVersion, Created: time.Now().UTC(), Start: s.Start, Cut: s.Cut, Jobs: s.Jobs}
	add := func(name, src string, size int64) error {
		// a backup streams while the server serves: read the way
		// datadir.BackgroundFile does, so commits do not wait behind it,
		// and past the page cache, which it would otherwise fill with the
		// whole data directory
		f, err := datadir.OpenUncached(src)
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		defer f.Close()
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		sum := newFileSum()
		if n, err := datadir.Copy(io.MultiWriter(tw, sum), io.NewSectionReader(f, 0, size)); err != nil {
			return fmt.Errorf("backup: copy %s: %w", src, err)
		} else if n != size {
			return fmt.Errorf("backup: %s: read %d bytes, want %d", src, n, size)
		}
		m.Files = append(m.Files, sum.file(name))
		return nil
	}
	st, err := os.Stat(s.Snapshot)
	if err != nil {
		return cw.n, fmt.Errorf("backup: %w", err)
	}
	if err := add("snap/"+snapshot.Name(s.Start), s.Snapshot, st.Size()); err != nil {
		return cw.n, err
	}
	for _, seg := range s.Segments {
		if err := add("wal/"+segmentName(seg.Number), seg.Path, seg.Size); err != nil {
			return cw.n, err
		}
	}
	for _, f := range s.Far {
		if err := add("far/"+f.Name, f.Path, f.Size); err != nil {
			return cw.n, err
		}
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return cw.n, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: BackupManifestName, Mode: 0o600, Size: int64(len(mb)), ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
		return cw.n, err
	}
	if _, err := tw.Write(mb); err != nil {
		return cw.n, err
	}
	return cw.n, tw.Close()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ReceiveBackup reads a backup stream (WriteTo's) into dir, which must
// not exist or be empty, checks every file against the manifest and writes
// the manifest last, so a directory with a manifest holds a complete copy.
func ReceiveBackup(r io.Reader, dir string) (*BackupManifest, error) {
	if err := emptyDir(dir); err != nil {
		return nil, err
	}
	tr := tar.NewReader(r)
	got := map[string]BackupFile{}
	var m *BackupManifest
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("backup stream: %w (the server may have failed mid-way; see its log)", err)
		}
		if m != nil {
			return nil, fmt.Errorf("backup stream: %q after the manifest", h.Name)
		}
		if h.Name == BackupManifestName {
			if h.Size > 64<<20 {
				return nil, fmt.Errorf("backup stream: manifest of %d bytes", h.Size)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("backup stream: manifest: %w", err)
			}
			m = &BackupManifest{}
			if err := json.Unmarshal(b, m); err != nil {
				return nil, fmt.Errorf("backup stream: manifest: %w", err)
			}
			continue
		}
		dst, err := backupPath(dir, h.Name)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		sum := newFileSum()
		_, err = io.Copy(io.MultiWriter(f, sum), tr)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("backup: write %s: %w", dst, err)
		}
		got[h.Name] = sum.file(h.Name)
	}
	if m == nil {
		return nil, errors.New("backup stream ended without a manifest: the backup is incomplete")
	}
	if err := checkManifest(m); err != nil {
		return nil, err
	}
	if len(got) != len(m.Files) {
		return nil, fmt.Errorf("backup stream: %d files, the manifest lists %d", len(got), len(m.Files))
	}
	for _, want := range m.Files {
		if err := compareSums(want, got[want.Path]); err != nil {
			return nil, err
		}
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := writeSynced(filepath.Join(dir, BackupManifestName), mb); err != nil {
		return nil, err
	}
	for _, d := range append(backupDirs, ".") {
		syncPath(filepath.Join(dir, d))
	}
	return m, nil
}

// backupDirs are the directories a backup holds files in.
var backupDirs = []string{"snap", "wal", "far"}

// backupPath maps a manifest path into dir, refusing anything that would
// land outside snap/, wal/ and far/.
func backupPath(dir, name string) (string, error) {
	clean := path.Clean(name)
	d, base, ok := strings.Cut(clean, "/")
	if clean != name || !ok || !slices.Contains(backupDirs, d) || base == "" || strings.Contains(base, "/") || base == ".." {
		return "", fmt.Errorf("backup: unexpected file name %q (want snap/NAME, wal/NAME or far/NAME)", name)
	}
	return filepath.Join(dir, d, base), nil
}

func checkManifest(m *BackupManifest) error {
	if m.Format != BackupFormat || m.Version != BackupVersion {
		return fmt.Errorf("backup manifest: format %q version %d, want %q version %d", m.Format, m.Version, BackupFormat, BackupVersion)
	}
	snaps := 0
	for _, f := range m.Files {
		if _, err := backupPath(".", f.Path); err != nil {
			return fmt.Errorf("backup manifest: %w", err)
		}
		if strings.HasPrefix(f.Path, "snap/") {
			snaps++
		}
		if want := (f.Size + BackupBlock - 1) / BackupBlock; int64(len(f.Blocks)) != want {
			return fmt.Errorf("backup manifest: %s: %d block checksums for %d bytes, want %d", f.Path, len(f.Blocks), f.Size, want)
		}
	}
	if snaps != 1 {
		return fmt.Errorf("backup manifest: %d snapshots, want exactly 1", snaps)
	}
	return nil
}

// compareSums reports the first block where got differs from want.
func compareSums(want, got BackupFile) error {
	if got.Path == "" {
		return fmt.Errorf("backup: %s: missing", want.Path)
	}
	for i := range min(len(want.Blocks), len(got.Blocks)) {
		if want.Blocks[i] != got.Blocks[i] {
			off := int64(i) * BackupBlock
			return fmt.Errorf("backup: %s: checksum mismatch in bytes %d..%d (block %d): the file is damaged", want.Path, off, min(off+BackupBlock, want.Size), i)
		}
	}
	if got.Size != want.Size {
		return fmt.Errorf("backup: %s: %d bytes, the manifest says %d (damaged from offset %d)", want.Path, got.Size, want.Size, min(got.Size, want.Size))
	}
	if got.SHA256 != want.SHA256 {
		return fmt.Errorf("backup: %s: SHA-256 mismatch (offset unknown): the file is damaged", want.Path)
	}
	return nil
}

// VerifyBackup checks a backup directory: the manifest, every file's
// size and checksums (an error names the file and the offset of the bad
// block), no file missing or extra, then the snapshot's and the log's own
// structure (the snapshot's blocks, the log's frames: internal/wal/verify.go
// writes its report to w).
func VerifyBackup(dir string, w io.Writer) (*BackupManifest, error) {
	mb, err := os.ReadFile(filepath.Join(dir, BackupManifestName))
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", dir, err)
	}
	m := &BackupManifest{}
	if err := json.Unmarshal(mb, m); err != nil {
		return nil, fmt.Errorf("backup %s: %s: %w", dir, BackupManifestName, err)
	}
	if err := checkManifest(m); err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, want := range m.Files {
		listed[want.Path] = true
		p, _ := backupPath(dir, want.Path)
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("backup: %s: %w", want.Path, err)
		}
		sum := newFileSum()
		_, err = io.Copy(sum, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("backup: read %s: %w", want.Path, err)
		}
		if err := compareSums(want, sum.file(want.Path)); err != nil {
			return nil, err
		}
	}
	for _, d := range backupDirs {
		ents, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("backup: %w", err)
		}
		for _, e := range ents {
			if !listed[d+"/"+e.Name()] {
				return nil, fmt.Errorf("backup: %s/%s is not in the manifest", d, e.Name())
			}
		}
	}
	snaps, err := snapshot.List(filepath.Join(dir, "snap"))
	if err != nil {
		return nil, err
	}
	if len(snaps) != 1 || snaps[0].Pos != m.Start {
		return nil, fmt.Errorf("backup: want one snapshot at %v in snap/, found %d", m.Start, len(snaps))
	}
	r, err := snapshot.Open(snaps[0].Path)
	if err != nil {
		return nil, err
	}
	r.Close()
	if _, err := os.Stat(filepath.Join(dir, "wal")); err == nil {
		rep, err := wal.VerifyCounting(filepath.Join(dir, "wal"), w, CountJobRecords)
		if err != nil {
			return nil, err
		}
		if !rep.OK() {
			return nil, fmt.Errorf("backup: log: %w", rep.Corruptions[0])
		}
	}
	for _, f := range m.Files {
		if name, ok := strings.CutPrefix(f.Path, "far/"); ok {
			p := filepath.Join(dir, "far", name)
			if err := farstore.Read(p, f.Size, func(int64, []byte) error { return nil }); err != nil {
				return nil, fmt.Errorf("backup: %w", err)
			}
		}
	}
	return m, nil
}

// RestoreBackup verifies the backup in dir and lays it out as the data
// directory dataDir, which must not exist or be empty. A server started on
// dataDir recovers the state at the manifest's Cut.
func RestoreBackup(dir, dataDir string) (*BackupManifest, error) {
	m, err := VerifyBackup(dir, io.Discard)
	if err != nil {
		return nil, err
	}
	if err := emptyDir(dataDir); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		src, _ := backupPath(dir, f.Path)
		dst, _ := backupPath(dataDir, f.Path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, err
		}
		if err := copyFile(src, dst); err != nil {
			return nil, err
		}
	}
	for _, d := range append(backupDirs, ".") {
		syncPath(filepath.Join(dataDir, d))
	}
	return m, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore: copy %s: %w", src, err)
	}
	return nil
}

// emptyDir creates dir (0700) or checks that it holds nothing.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		return fmt.Errorf("%s is not empty (holds %s): give a new or empty directory", dir, strings.Join(names[:min(3, len(names))], ", "))
	}
	return nil
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncPath(p string) {
	if f, err := os.Open(p); err == nil {
		f.Sync()
		f.Close()
	}
}
