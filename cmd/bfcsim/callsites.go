package main

import (
	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/trace"
)

// framesHelp explains --frames, the same wherever a command names call
// sites from recorded stacks.
const framesHelp = "comma-separated path fragments of your own code (e.g. /src/myproj/,train.py): the call site of an allocation " +
	"is the innermost frame whose file holds one (default: the innermost Python frame outside site-packages, " +
	"dist-packages, the standard library and the frameworks' own packages)"

// addFramesFlag registers --frames on a command that reports call sites.
func (o *replayOptions) addFramesFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.frames, "frames", "", framesHelp)
}

// frameRule is the rule --frames gives.
func (o *replayOptions) frameRule() trace.FrameRule { return trace.ParseFrameRule(o.frames) }
