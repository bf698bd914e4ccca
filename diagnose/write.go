package diagnose

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
	"github.com/bfcsim/bfcsim/diagnose/pytorchoom"
	"github.com/bfcsim/bfcsim/internal/sticky"
)

// WritePyTorch writes the reading of PyTorch's out-of-memory message, and
// the check of its snapshot when there is one (check may be nil), as text
// or, with format "json", as one JSON object: the message's report, with
// the check under "snapshot".
func WritePyTorch(w io.Writer, format string, rep *pytorchoom.Report, check *SnapshotCheck) error {
	sw := &sticky.Writer{W: w}
	if format == "json" {
		enc := json.NewEncoder(sw)
		enc.SetIndent("", "  ")
		out := struct {
			*pytorchoom.Report
			Snapshot *SnapshotCheck `json:"snapshot,omitempty"`
		}{rep, check}
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		if err := pytorchoom.WriteText(sw, rep); err != nil {
			return err
		}
		if check != nil {
			WriteSnapshotCheck(sw, check)
		}
	}
	if sw.Err != nil {
		return fmt.Errorf("writing the report: %w", sw.Err)
	}
	return nil
}

// WriteBFC writes the reading of a BFC pool's state as text or, with
// format "json", as bfcdump's InspectReport; chunks lists every chunk.
func WriteBFC(w io.Writer, format string, snap *bfcdump.Snapshot, chunks bool) error {
	sw := &sticky.Writer{W: w}
	if format == "json" {
		enc := json.NewEncoder(sw)
		enc.SetIndent("", "  ")
		if err := enc.Encode(bfcdump.NewInspectReport(snap, chunks)); err != nil {
			return err
		}
	} else if err := bfcdump.WriteInspect(sw, snap, bfcdump.InspectOptions{Chunks: chunks}); err != nil {
		return err
	}
	if sw.Err != nil {
		return fmt.Errorf("writing the report: %w", sw.Err)
	}
	return nil
}
