package search

import "context"

// Jobs. A job is several traces that run at once, one per device: the
// devices of a multi-GPU snapshot, or the ranks of a run recorded one file
// per rank. It fits on a GPU when every one of its traces does, so what
// the job needs is the most any of its traces needs, and the trace that
// needs it decides. Its settings are one for all (one
// PYTORCH_CUDA_ALLOC_CONF for every rank), so Advise weighs each candidate
// by the trace it suits least.

// Job is the traces of one job, each loaded with the same allocators, in
// the order they are reported.
type Job []*Trace

// JobFit is one allocator's fit of a job.
type JobFit struct {
	Allocator string
	// Members are each trace's own fit, in the job's order.
	Members []FitResult
	// Fits says that every trace fits on some device; MinCapacityBytes is
	// then the most any of them needs, and Deciding the trace that needs
	// it (the first, on a tie). A job that does not fit has Deciding the
	// first trace that fits nowhere.
	Fits             bool
	MinCapacityBytes uint64
	Deciding         int
}

// Fit fits each trace of the job (Trace.Fit) and weighs the job's need.
func (j Job) Fit(ctx context.Context) ([]JobFit, error) {
	var out []JobFit
	for m, t := range j {
		res, err := t.Fit(ctx)
		if err != nil {
			return nil, err
		}
		for i, r := range res {
			if m == 0 {
				out = append(out, JobFit{Allocator: r.Allocator})
			}
			out[i].Members = append(out[i].Members, r)
		}
	}
	for i := range out {
		out[i].Fits, out[i].MinCapacityBytes, out[i].Deciding = weigh(out[i].Members)
	}
	return out, nil
}

// weigh returns what a job of members needs: whether every member fits,
// the most any needs, and the member that decides.
func weigh(members []FitResult) (fits bool, need uint64, deciding int) {
	for i, r := range members {
		if !r.Fits {
			return false, 0, i
		}
		if i == 0 || r.MinCapacityBytes > need {
			need, deciding = r.MinCapacityBytes, i
		}
	}
	return true, need, deciding
}
