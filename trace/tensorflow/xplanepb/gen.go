// Package xplanepb holds the Go types for TensorFlow's profiler XSpace
// protobuf (package tensorflow.profiler): the XSpace, XPlane, XLine, XEvent,
// XStat, XEventMetadata and XStatMetadata messages that TensorFlow, JAX and
// XLA profilers write as *.xplane.pb files.
//
// xplane.proto is a copy of tsl/profiler/protobuf/xplane.proto from
// https://github.com/google/tsl (Apache License 2.0, see LICENSE and
// README.md in this directory) with only a go_package option added, so the
// field numbers and wire format are upstream's.
//
// xplane.pb.go is generated from xplane.proto and committed, so a build needs
// neither tool. To regenerate it, install protoc (Debian: apt-get install
// protobuf-compiler) and protoc-gen-go at the version of
// google.golang.org/protobuf in go.mod
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12), then run
// go generate ./trace/tensorflow/xplanepb.
package xplanepb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative xplane.proto
