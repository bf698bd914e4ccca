package browsertest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyPNG is a 3×2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for x := range 3 {
		img.Set(x, 0, color.RGBA{R: 200, A: 255})
		img.Set(x, 1, color.RGBA{B: 200, A: 255})
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	page := `<!DOCTYPE html><html><head><meta charset="utf-8"><title>tiny &amp; page</title></head><body>
<img alt="good" src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(tinyPNG(t)) + `">
<img alt="broken" src="missing.png">
<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></table>
</body></html>`
	file := filepath.Join(dir, "page.html")
	require.NoError(t, os.WriteFile(file, []byte(page), 0o644))
	shot := filepath.Join(dir, "page.png")

	got := Open(t, file, shot)

	assert.Equal(t, 2, got.Images)
	assert.Equal(t, 1, got.LoadedImages)
	assert.Equal(t, 1, got.Tables)
	assert.Equal(t, 3, got.TableRows)
	assert.Equal(t, "tiny & page", got.Title)
	require.Len(t, got.BrokenImages, 1)
	assert.Equal(t, "broken: missing.png", got.BrokenImages[0])

	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "the screenshot is a PNG")
	assert.GreaterOrEqual(t, img.Bounds().Dx(), 800, "the screenshot is as wide as the window")
	assert.Positive(t, img.Bounds().Dy())
}

// A page without images or tables counts zero, and no screenshot is taken
// when none is asked for.
func TestOpenEmptyPage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "empty.html")
	require.NoError(t, os.WriteFile(file, []byte("<!DOCTYPE html><title>empty</title><p>nothing"), 0o644))
	got := Open(t, file, "")
	assert.Equal(t, Page{Title: "empty", BrokenImages: []string{}}, got)
}

// recorder is a testing.TB that notes a skip or a failure and stops, as the
// real one does, without ending the test that uses it.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// openWith runs Open on a recorder, in a goroutine of its own because Skipf
// and Fatalf end the goroutine.
func openWith(t *testing.T) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Open(r, "page.html", "")
	}()
	<-done
	return r
}

// Without a browser the test is skipped, but in CI it fails.
func TestOpenWithoutBrowser(t *testing.T) {
	t.Setenv("CHROMIUM", filepath.Join(t.TempDir(), "no-such-browser"))
	_, err := ExecPath()
	assert.ErrorContains(t, err, "$CHROMIUM=")

	t.Setenv("CI", "")
	r := openWith(t)
	assert.Empty(t, r.failed)
	assert.Contains(t, r.skipped, "skipping the browser test")
	assert.Contains(t, r.skipped, "install the Debian packages chromium and chromium-driver")

	t.Setenv("CI", "1")
	r = openWith(t)
	assert.Empty(t, r.skipped)
	assert.Contains(t, r.failed, "Chromium is required in CI (install the Debian packages chromium and chromium-driver)")
}
