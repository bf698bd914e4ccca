package bfcdump

// memorypb/bfc_memory_map.pb.go is generated from memorypb/bfc_memory_map.proto
// and committed, so a build needs neither tool. To regenerate it, install
// protoc (Debian: apt-get install protobuf-compiler) and protoc-gen-go at the
// version of google.golang.org/protobuf in go.mod
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12), then run
// go generate ./diagnose/bfcdump.

//go:generate protoc --proto_path=memorypb --go_out=memorypb --go_opt=paths=source_relative bfc_memory_map.proto
