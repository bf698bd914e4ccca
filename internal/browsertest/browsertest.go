// Package browsertest opens a local HTML file in headless Chromium, for tests
// that check a page the way a reader sees it: that every image loads, that the
// tables render, and what the page looks like (a full-page screenshot kept as
// a test artefact).
//
// Open drives the Debian Chromium binary through the DevTools protocol
// (github.com/chromedp/chromedp):
//
//  1. Find the browser: $CHROMIUM, else /usr/bin/chromium,
//     /usr/bin/chromium-browser, or chromium, chromium-browser, google-chrome
//     on PATH. Without one the test is skipped, unless $CI is set: CI must
//     run the browser tests, so there it fails.
//  2. Start it headless, sandbox-free (CI runs as root), with a fresh
//     profile in the test's temporary directory and every background
//     service off (updates, sync, QUIC): on a closed network their
//     connection attempts would fail or stall.
//  3. Load the file, wait for the load event and for every image to finish
//     (load or error), count what the DOM holds, and take the screenshot.
//
// The whole visit has one deadline, Timeout. It is a normal package, not a
// _test file, so that the tests of several packages can share it.
package browsertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeout bounds one Open: starting Chromium, loading the page, counting and
// taking the screenshot. A cold start on a slow CI machine takes seconds;
// a minute leaves room without letting a hung browser stall the test run.
const Timeout = 60 * time.Second

// Page is what a browser saw of a page.
type Page struct {
	Images, LoadedImages, Tables, TableRows int
	Title                                   string
	// BrokenImages names the images that did not load: their alt text and
	// the start of their src.
	BrokenImages []string
}

// Packages names the Debian packages that provide the browser.
const Packages = "chromium and chromium-driver"

// candidates are where Chromium is looked for when $CHROMIUM is not set:
// Debian's and Ubuntu's paths first, then names on PATH.
var candidates = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "chromium-browser", "google-chrome"}

// ExecPath returns the Chromium binary Open would use: $CHROMIUM if set, else
// the first candidate found. It returns an error naming what it tried.
func ExecPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("$CHROMIUM=%s: %w", p, err)
		}
		return path, nil
	}
	for _, c := range candidates {
		if path, err := exec.LookPath(c); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (tried $CHROMIUM, %v)", candidates)
}

// Open loads file (a local path) in headless Chromium, waits for load, counts <img> elements and how many loaded (complete && naturalWidth > 0), <table>s and their rows, and saves a full-page PNG screenshot to screenshot (if not "").
//
// Without a browser it skips the test, or fails it when $CI is set. Any other
// trouble (the browser does not start, the page does not load in Timeout,
// the screenshot cannot be written) fails the test.
func Open(t testing.TB, file, screenshot string) Page {
	t.Helper()
	execPath, err := ExecPath()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("browsertest: Chromium is required in CI (install the Debian packages %s): %v", Packages, err)
		}
		t.Skipf("browsertest: skipping the browser test: %v; install the Debian packages %s, or set $CHROMIUM", err, Packages)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	page, shot, err := visit(execPath, t.TempDir(), abs, screenshot != "")
	if err != nil {
		t.Fatalf("browsertest: loading %s in %s: %v", abs, execPath, err)
	}
	if screenshot != "" {
		if err := os.WriteFile(screenshot, shot, 0o644); err != nil {
			t.Fatalf("browsertest: saving the screenshot: %v", err)
		}
	}
	return page
}

// Drive loads file in headless Chromium, as Open does, then runs fn with
// the page's browser context, for tests that work the page: chromedp
// actions such as mouse events and Evaluate. Without a browser it skips the
// test, or fails it when $CI is set; a load or fn that fails fails the test.
// The whole visit has one deadline, Timeout.
func Drive(t testing.TB, file string, fn func(ctx context.Context) error) {
	t.Helper()
	execPath, err := ExecPath()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("browsertest: Chromium is required in CI (install the Debian packages %s): %v", Packages, err)
		}
		t.Skipf("browsertest: skipping the browser test: %v; install the Debian packages %s, or set $CHROMIUM", err, Packages)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	err = session(execPath, t.TempDir(), func(ctx context.Context) error {
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		if err := chromedp.Do(ctx, chromedp.Navigate(u.String())); err != nil {
			return fmt.Errorf("navigating: %w", err)
		}
		return fn(ctx)
	})
	if err != nil {
		t.Fatalf("browsertest: %s in %s: %v", abs, execPath, err)
	}
}

// countScript waits for every image to settle, then counts. It runs after
// the load event, when images normally have settled already; the wait covers
// the rest.
const countScript = `(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener('load', done, {once: true});
    img.addEventListener('error', done, {once: true});
  })));
  const loaded = img => img.complete && img.naturalWidth > 0;
  const tables = Array.from(document.querySelectorAll('table'));
  return {
    images: imgs.length,
    loaded: imgs.filter(loaded).length,
    tables: tables.length,
    rows: tables.reduce((n, t) => n + t.rows.length, 0),
    title: document.title,
    broken: imgs.filter(img => !loaded(img)).map(img => {
      const src = img.getAttribute('src') || '';
      return (img.alt ? img.alt + ': ' : '') + (src.length > 80 ? src.slice(0, 80) + '...' : src);
    }),
  };
})()`

type counts struct {
	Images int      `json:"images"`
	Loaded int      `json:"loaded"`
	Tables int      `json:"tables"`
	Rows   int      `json:"rows"`
	Title  string   `json:"title"`
	Broken []string `json:"broken"`
}

// visit runs Chromium with a profile under tmp, loads the file and counts;
// with shoot it also takes a full-page PNG screenshot.
func visit(execPath, tmp, file string, shoot bool) (Page, []byte, error) {
	var page Page
	var shot []byte
	err := session(execPath, tmp, func(ctx context.Context) error {
		var err error
		page, shot, err = load(ctx, file, shoot)
		return err
	})
	return page, shot, err
}

// session runs Chromium with a profile under tmp and calls fn with its
// context, within Timeout; then it closes the browser and removes the
// profile.
func session(execPath, tmp string, fn func(ctx context.Context) error) error {
	profile := filepath.Join(tmp, "chromium-profile")
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(execPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
	)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	err := fn(browserCtx)
	// Close the browser gracefully, then wait for it to exit, so that it
	// stops writing to its profile before the profile is removed.
	cancelBrowser()
	cancelAlloc()
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("no result within %v: %w", Timeout, err)
	}
	if rmErr := removeProfile(profile); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

func load(ctx context.Context, file string, shoot bool) (Page, []byte, error) {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(file)}
	if err := chromedp.Do(ctx, chromedp.Navigate(u.String())); err != nil {
		return Page{}, nil, fmt.Errorf("navigating: %w", err)
	}
	c, err := chromedp.Run(ctx, chromedp.Evaluate[counts](countScript, chromedp.EvalAwaitPromise))
	if err != nil {
		return Page{}, nil, fmt.Errorf("counting images and tables: %w", err)
	}
	page := Page{
		Images: c.Images, LoadedImages: c.Loaded, Tables: c.Tables, TableRows: c.Rows,
		Title: c.Title, BrokenImages: c.Broken,
	}
	if !shoot {
		return page, nil, nil
	}
	// Quality 100 asks for a PNG; anything less is a JPEG.
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return page, nil, fmt.Errorf("taking the screenshot: %w", err)
	}
	return page, shot, nil
}

// removeProfile removes the browser's profile directory. Chromium's helper
// processes can outlive the main one by a moment and still write there, so
// it retries for a few seconds before giving up.
func removeProfile(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("removing the browser profile: %w", err)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}
