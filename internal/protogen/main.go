// Command protogen regenerates the Go code of the .proto files under
// proto/ (`make gen` runs it from the repository root).
//
// It compiles every proto/**/*.proto with github.com/bufbuild/protocompile
// (the version in go.mod; google/protobuf/*.proto come with it), builds the
// plugin request protoc would build, and runs the two code generators as
// protoc plugins, each pinned to an exact version:
//
//	go run google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go run google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//
// with paths=source_relative, writing demo.pb.go and demo_grpc.pb.go next
// to demo.proto. No protoc binary is needed, and the output depends only
// on go.mod and the pinned versions, so CI can check that the committed
// files are fresh (`make gen && git diff --exit-code -- proto/`).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

// The pinned code generators.
var plugins = []string{
	"google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12",
	"google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2",
}

func main() {
	root := flag.String("root", "proto", "folder holding the .proto files (the import root)")
	flag.Parse()
	if err := run(context.Background(), *root); err != nil {
		log.Fatalf("protogen: %v", err)
	}
}

func run(ctx context.Context, root string) error {
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".proto") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fmt.Errorf("no .proto files under %s", root)
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{root}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(ctx, names...)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: names, Parameter: proto.String("paths=source_relative")}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		var fdp *descriptorpb.FileDescriptorProto
		if r, ok := fd.(linker.Result); ok {
			fdp = r.FileDescriptorProto()
		} else {
			fdp = protodesc.ToFileDescriptorProto(fd)
		}
		req.ProtoFile = append(req.ProtoFile, fdp)
	}
	for _, f := range files {
		add(f)
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	for _, plugin := range plugins {
		if err := runPlugin(ctx, plugin, in, root); err != nil {
			return err
		}
	}
	return nil
}

// runPlugin runs one protoc plugin on the request in and writes the files
// it returns under root.
func runPlugin(ctx context.Context, plugin string, in []byte, root string) error {
	cmd := exec.CommandContext(ctx, "go", "run", plugin)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w", plugin, err)
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("%s: reading its answer: %w", plugin, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("%s: %s", plugin, resp.GetError())
	}
	for _, f := range resp.File {
		if f.InsertionPoint != nil {
			return fmt.Errorf("%s: insertion points are not supported (%s)", plugin, f.GetName())
		}
		path := filepath.Join(root, filepath.FromSlash(f.GetName()))
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
