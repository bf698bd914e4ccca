package pytorch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
)

// differentialCase is one entry of the cases.json that
// testdata/differential.py writes.
type differentialCase struct {
	Case        int    `json:"case"`
	Description string `json:"description"`
	Protocol    int    `json:"protocol"`
	Pickler     string `json:"pickler"`
	Optimized   bool   `json:"optimized"`
	Devices     int    `json:"devices"`
	Expect      string `json:"expect"` // "ok", "error" or "any", for the default device
	Known       string `json:"known"`  // a divergence known when the case was written
}

// TestPickleMatchesJSON checks the pickle walker against CPython's own
// unpickler: testdata/differential.py writes random snapshot-like
// structures as pickles (protocols 0 to 5, C and pure-Python pickler,
// sometimes optimized) and as the JSON of what pickle.loads returns for
// them. The JSON reader shares nothing with the pickle walker but the
// builder, so both files must convert to the same trace, byte for byte,
// with the same Stats, or both must fail (their messages may differ: JSON
// writes every dict key as a string). A trace written must read back.
//
// A case marked known shows a divergence found when the test was written;
// it is skipped while it still shows it, and fails once it does not, so
// that the mark goes with the fix.
func TestPickleMatchesJSON(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is needed to write the differential cases")
		}
		t.Skip("python3 not found: cannot write the differential cases")
	}
	dir := t.TempDir()
	args := []string{"testdata/differential.py", dir}
	if seed := os.Getenv("BFCSIM_DIFFERENTIAL_SEED"); seed != "" {
		args = append(args, seed) // other cases than the usual ones
	}
	out, err := exec.Command(python, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	manifest, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	require.NoError(t, err)
	var cases []differentialCase
	require.NoError(t, json.Unmarshal(manifest, &cases))
	require.NotEmpty(t, cases)

	var converted, refused int
	for _, c := range cases {
		name := fmt.Sprintf("case-%d", c.Case)
		t.Run(name, func(t *testing.T) {
			what := fmt.Sprintf("%s (%s; protocol %d, %s pickler, optimized %v)",
				name, c.Description, c.Protocol, c.Pickler, c.Optimized)
			var problems []string
			// The default device, then each device in turn if there are
			// several: the entries of those the default does not pick are
			// decoded too.
			for dev := -1; dev < c.Devices && (dev < 0 || c.Devices > 1); dev++ {
				at := fmt.Sprintf("%s, device %d", what, dev)
				opt := Options{Device: dev, Name: name}
				if c.Case%3 == 1 {
					// The spool's temporary file, as well as memory.
					opt.TempDir, opt.memLimit = t.TempDir(), 1<<10
				}
				// Some cases are read in small pieces, so that opcodes,
				// strings and tokens are split across reads.
				split := c.Case%4 == 3
				p := differentialConvert(t, filepath.Join(dir, name+".pickle"), opt, split)
				j := differentialConvert(t, filepath.Join(dir, name+".json"), opt, split)
				problems = append(problems, p.compare(j, at)...)
				if p.err != nil && j.err != nil && p.err.Error() != j.err.Error() {
					t.Logf("%s: both fail, with different messages:\n  pickle: %v\n  json:   %v", at, p.err, j.err)
				}
				if dev != -1 {
					continue
				}
				switch c.Expect {
				case "ok":
					if p.err != nil {
						problems = append(problems, fmt.Sprintf("%s: must convert: %v", at, p.err))
					}
					converted++
				case "error":
					if p.err == nil {
						problems = append(problems, at+": must be refused")
					}
					refused++
				case "any":
				default:
					t.Fatalf("%s: unknown expectation %q", at, c.Expect)
				}
			}
			switch {
			case c.Known != "" && len(problems) > 0:
				t.Skipf("known divergence: %s\n%s", c.Known, problems[0])
			case c.Known != "":
				t.Errorf("%s is marked with a known divergence that it no longer shows (%s): drop the mark", what, c.Known)
			}
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
	t.Logf("%d cases must convert, %d must be refused", converted, refused)
}

// differentialResult is what converting one file gave.
type differentialResult struct {
	out   []byte
	st    Stats
	err   error
	rderr error // reading the written trace back
}

func differentialConvert(t *testing.T, file string, opt Options, split bool) differentialResult {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var r io.Reader = f
	if split {
		r = &pieceReader{r: f}
	}
	var buf bytes.Buffer
	var res differentialResult
	res.st, res.err = Convert(context.Background(), r, trace.NewWriter(&buf), opt)
	res.out = buf.Bytes()
	if res.err == nil {
		tr, err := trace.NewReader(bytes.NewReader(res.out), file)
		if err == nil {
			for tr.Next() {
			}
			err = tr.Err()
		}
		res.rderr = err
	}
	return res
}

// compare says how the pickle's result p differs from the JSON's j.
func (p differentialResult) compare(j differentialResult, at string) []string {
	var problems []string
	switch {
	case p.err != nil && j.err != nil:
		return nil // the messages may differ: JSON writes every key as a string
	case p.err != nil:
		return []string{fmt.Sprintf("%s: only the pickle fails: %v", at, p.err)}
	case j.err != nil:
		return []string{fmt.Sprintf("%s: only the JSON fails: %v", at, j.err)}
	}
	if p.rderr != nil {
		problems = append(problems, fmt.Sprintf("%s: the pickle's trace does not read back: %v", at, p.rderr))
	}
	if j.rderr != nil {
		problems = append(problems, fmt.Sprintf("%s: the JSON's trace does not read back: %v", at, j.rderr))
	}
	if !assert.ObjectsAreEqual(j.st, p.st) {
		problems = append(problems, fmt.Sprintf("%s: the Stats differ:\n  pickle: %+v\n  json:   %+v", at, p.st, j.st))
	}
	if !bytes.Equal(p.out, j.out) {
		problems = append(problems, fmt.Sprintf("%s: the traces differ: %s", at, firstDifference(p.out, j.out)))
	}
	return problems
}

// firstDifference shows the first line where two traces differ.
func firstDifference(p, j []byte) string {
	pl, jl := bytes.Split(p, []byte("\n")), bytes.Split(j, []byte("\n"))
	for i := 0; i < min(len(pl), len(jl)); i++ {
		if !bytes.Equal(pl[i], jl[i]) {
			return fmt.Sprintf("line %d:\n  pickle: %s\n  json:   %s", i+1, clip(pl[i]), clip(jl[i]))
		}
	}
	return fmt.Sprintf("the pickle's has %d lines, the JSON's %d", len(pl), len(jl))
}

func clip(b []byte) string {
	if r := []rune(string(b)); len(r) > 300 {
		return string(r[:150]) + " ... " + string(r[len(r)-150:])
	}
	return string(b)
}

// pieceReader returns what it reads in pieces of 1 to 4,093 bytes, in turn.
type pieceReader struct {
	r io.Reader
	n int
}

func (p *pieceReader) Read(b []byte) (int, error) {
	pieces := [...]int{1, 7, 2, 61, 1, 509, 3, 4093}
	p.n++
	return p.r.Read(b[:min(len(b), pieces[p.n%len(pieces)])])
}
