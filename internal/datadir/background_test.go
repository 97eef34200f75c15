package datadir

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestBackgroundFileReadsWhatTheFileHolds(t *testing.T) {
	t.Run("cached", func(t *testing.T) { testBackgroundFile(t, OpenBackground) })
	t.Run("uncached", func(t *testing.T) { testBackgroundFile(t, OpenUncached) })
}

func testBackgroundFile(t *testing.T, open func(string) (*BackgroundFile, error)) {
	data := make([]byte, 3*BackgroundChunk+1234)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.DropCached()

	// ReadAt across chunk boundaries, and past the end
	for _, c := range []struct{ off, n int }{
		{0, len(data)}, {1, BackgroundChunk}, {BackgroundChunk - 7, 2*BackgroundChunk + 9}, {len(data) - 5, 5}, {0, 0},
		{4095, 2}, {len(data) - directAlign - 3, directAlign + 3},
	} {
		p := make([]byte, c.n)
		n, err := f.ReadAt(p, int64(c.off))
		if err != nil || n != c.n || !bytes.Equal(p, data[c.off:c.off+c.n]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want the file's bytes", c.n, c.off, n, err)
		}
	}
	p := make([]byte, 10)
	if n, err := f.ReadAt(p, int64(len(data)-4)); n != 4 || err != io.EOF || !bytes.Equal(p[:4], data[len(data)-4:]) {
		t.Fatalf("ReadAt past the end = %d, %v; want 4, EOF", n, err)
	}

	if n, err := f.ReadAt(p, int64(len(data)+100)); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt beyond the end = %d, %v; want 0, EOF", n, err)
	}

	// Read never asks for more than a chunk
	big := make([]byte, 4*BackgroundChunk)
	var got []byte
	for {
		n, err := f.Read(big)
		if n > BackgroundChunk {
			t.Fatalf("Read returned %d bytes, more than a chunk (%d)", n, BackgroundChunk)
		}
		got = append(got, big[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("Read through the file: bytes differ")
	}

	// Copy of a section
	var out bytes.Buffer
	n, err := Copy(&out, io.NewSectionReader(f, 100, int64(len(data)-200)))
	if err != nil || n != int64(len(data)-200) || !bytes.Equal(out.Bytes(), data[100:len(data)-100]) {
		t.Fatalf("Copy = %d, %v; want the section's %d bytes", n, err, len(data)-200)
	}
}

func TestOpenBackgroundMissingFile(t *testing.T) {
	for _, open := range []func(string) (*BackgroundFile, error){OpenBackground, OpenUncached} {
		if _, err := open(filepath.Join(t.TempDir(), "none")); !os.IsNotExist(err) {
			t.Fatalf("err = %v, want a not-exist error", err)
		}
	}
}
