package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/trace"
)

// BaselineUnusableError is a baseline that a new one may replace (compare
// --update-baseline): one that does not exist, or a report of another
// version.
type BaselineUnusableError struct {
	Path string
	Why  string // "does not exist"
}

func (e *BaselineUnusableError) Error() string {
	return fmt.Sprintf("baseline %s %s; create it from this run with --update-baseline", e.Path, e.Why)
}

// ReadBaseline reads a report.json (gzip or zstd compressed too) as a
// baseline to Compare with.
func ReadBaseline(path string) (*Report, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &BaselineUnusableError{path, "does not exist"}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the baseline: %w", err)
	}
	defer f.Close()
	data, err := readWhole(f)
	if err != nil {
		return nil, fmt.Errorf("reading the baseline %s: %w", path, err)
	}
	notReport := func(why string) error {
		return fmt.Errorf("baseline %s is not a bfcsim report.json (%s); write one with --update-baseline or 'bfcsim replay -o DIR'", path, why)
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, notReport(err.Error())
	}
	raw, ok := head["bfcsim_report"]
	if !ok {
		return nil, notReport(`no "bfcsim_report" key`)
	}
	var version int
	if err := json.Unmarshal(raw, &version); err != nil {
		return nil, notReport(`"bfcsim_report" is ` + string(raw))
	}
	if version != Version {
		return nil, &BaselineUnusableError{path, fmt.Sprintf(
			"is a version %d report (\"bfcsim_report\": %d), and this bfcsim reads version %d", version, version, Version)}
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, notReport(err.Error())
	}
	return &rep, nil
}

// ReadSweep reads a sweep's report.json (gzip or zstd compressed too), as
// MergeSweeps takes it.
func ReadSweep(path string) (*Sweep, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readWhole(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	notSweep := func(why string) error {
		return fmt.Errorf("%s is not the report.json of a sweep (%s); 'bfcsim sweep -o DIR' writes one", path, why)
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, notSweep(err.Error())
	}
	if _, ok := head["bfcsim_report"]; !ok {
		return nil, notSweep(`no "bfcsim_report" key`)
	}
	if _, ok := head["sweep"]; !ok {
		return nil, notSweep(`no "sweep" key: a report of 'bfcsim replay'?`)
	}
	var s Sweep
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, notSweep(err.Error())
	}
	return &s, nil
}

// NothingToCompare says why a run and the baseline at path have no result
// in common.
func NothingToCompare(path string, base, rep Report) error {
	names := func(r Report) string {
		var s []string
		for _, t := range r.Traces {
			s = append(s, t.Name)
		}
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	return fmt.Errorf("nothing to compare: baseline %s has none of this run's traces and allocators "+
		"(run: %s; baseline: %s); make a new baseline with --update-baseline", path, names(rep), names(base))
}

// Describe says what a report holds: "2 traces, 8 results".
func Describe(rep Report) string {
	n := 0
	for _, t := range rep.Traces {
		n += len(t.Results)
	}
	return Plural(int64(len(rep.Traces)), "trace", "traces") + ", " + Plural(int64(n), "result", "results")
}

// readWhole reads a report file whole, gzip- or zstd-compressed or not: a
// report is small, whatever the length of the traces it describes.
func readWhole(f io.Reader) ([]byte, error) {
	r, err := trace.NewDecompressReader(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// WriteJSONFile writes rep as report.json to path, whole or not at all,
// creating its directory.
func WriteJSONFile(path string, rep Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return outfile.Write(path, func(w io.Writer) error { return WriteJSON(w, rep) })
}
