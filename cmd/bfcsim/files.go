package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// checkOutputs refuses, before any work is done, output paths that would
// fail at the end or destroy something: a directory where a file must go, a
// file where a directory must go, an output that is also an input, or two
// outputs that are the same file.
func checkOutputs(inputs []string, dir string, files ...string) error {
	if dir != "" {
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			return fmt.Errorf("-o %s: not a directory", dir)
		}
		for _, name := range []string{"report.json", "report.md", "index.html", "timeline.csv"} {
			files = append(files, filepath.Join(dir, name))
		}
	}
	seen := map[string]string{}
	for _, f := range files {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory", f)
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		if other, dup := seen[abs]; dup {
			return fmt.Errorf("%s and %s are the same file", other, f)
		}
		seen[abs] = f
		for _, in := range inputs {
			if in == "-" {
				continue
			}
			a, errA := os.Stat(in)
			b, errB := os.Stat(f)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return fmt.Errorf("refusing to overwrite the input %s with an output", in)
			}
		}
	}
	return nil
}

// checkStdinOnce refuses "-" given more than once: standard input can be read once.
func checkStdinOnce(paths []string) error {
	n := 0
	for _, p := range paths {
		if p == "-" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("- (standard input) is given %d times; it can be read only once", n)
	}
	return nil
}
