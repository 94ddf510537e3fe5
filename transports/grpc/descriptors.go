package grpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	ggrpc "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	rpbalpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// maxDescriptorSet caps a descriptor_set file.
const maxDescriptorSet = 64 << 20

// skipService reports whether a service is infrastructure, not tools:
// reflection and health.
func skipService(name string) bool {
	return strings.HasPrefix(name, "grpc.reflection.") || strings.HasPrefix(name, "grpc.health.")
}

// source is where a manual's descriptors came from.
type source struct {
	files    *protoregistry.Files
	services []protoreflect.ServiceDescriptor
	origin   string // "reflection (grpc.reflection.v1)", "descriptor_set x", "proto_files"
}

// loadDescriptorSet reads a binary FileDescriptorSet.
func loadDescriptorSet(path string) (*source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("descriptor_set: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDescriptorSet+1))
	if err != nil {
		return nil, fmt.Errorf("descriptor_set %s: %w", path, err)
	}
	if len(b) > maxDescriptorSet {
		return nil, fmt.Errorf("descriptor_set %s is larger than %d bytes", path, maxDescriptorSet)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("descriptor_set %s is not a binary FileDescriptorSet: %w", path, err)
	}
	byName := map[string]*descriptorpb.FileDescriptorProto{}
	for _, fd := range set.File {
		byName[fd.GetName()] = fd
	}
	files, err := buildFiles(byName)
	if err != nil {
		return nil, fmt.Errorf("descriptor_set %s: %w", path, err)
	}
	var services []protoreflect.ServiceDescriptor
	for _, fd := range set.File {
		f, _ := files.FindFileByPath(fd.GetName())
		svcs := f.Services()
		for i := range svcs.Len() {
			if !skipService(string(svcs.Get(i).FullName())) {
				services = append(services, svcs.Get(i))
			}
		}
	}
	return &source{files: files, services: services, origin: "descriptor_set " + path}, nil
}

// compileProtos compiles .proto files with protocompile.
func compileProtos(ctx context.Context, protoFiles, importPaths []string) (*source, error) {
	if len(importPaths) == 0 {
		importPaths = []string{"."}
	}
	names := make([]string, len(protoFiles))
	for i, f := range protoFiles {
		names[i] = filepath.ToSlash(f)
		for _, ip := range importPaths {
			if rel, err := filepath.Rel(ip, f); err == nil && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel) {
				names[i] = filepath.ToSlash(rel)
				break
			}
		}
	}
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: importPaths}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("proto_files: %w", err)
	}
	files := new(protoregistry.Files)
	var register func(fd protoreflect.FileDescriptor) error
	register = func(fd protoreflect.FileDescriptor) error {
		if _, err := files.FindFileByPath(fd.Path()); err == nil {
			return nil
		}
		imports := fd.Imports()
		for i := range imports.Len() {
			if err := register(imports.Get(i).FileDescriptor); err != nil {
				return err
			}
		}
		return files.RegisterFile(fd)
	}
	var services []protoreflect.ServiceDescriptor
	for _, f := range compiled {
		if err := register(f); err != nil {
			return nil, fmt.Errorf("proto_files: %w", err)
		}
		svcs := f.Services()
		for i := range svcs.Len() {
			if !skipService(string(svcs.Get(i).FullName())) {
				services = append(services, svcs.Get(i))
			}
		}
	}
	return &source{files: files, services: services, origin: "proto_files"}, nil
}

// buildFiles links file descriptor protos into a registry. Imports that
// none of them provides are taken from the descriptors linked into utcpd
// (google/protobuf/*.proto, google/rpc/*.proto).
func buildFiles(byName map[string]*descriptorpb.FileDescriptorProto) (*protoregistry.Files, error) {
	files := new(protoregistry.Files)
	visiting := map[string]bool{}
	var build func(name string) error
	build = func(name string) error {
		if _, err := files.FindFileByPath(name); err == nil {
			return nil
		}
		fdp, ok := byName[name]
		if !ok {
			fd, err := protoregistry.GlobalFiles.FindFileByPath(name)
			if err != nil {
				return fmt.Errorf("import %q is missing", name)
			}
			return registerWithImports(files, fd)
		}
		if visiting[name] {
			return fmt.Errorf("import cycle through %q", name)
		}
		visiting[name] = true
		for _, dep := range fdp.GetDependency() {
			if err := build(dep); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		fd, err := protodesc.NewFile(fdp, files)
		if err != nil {
			return err
		}
		return files.RegisterFile(fd)
	}
	for name := range byName {
		if err := build(name); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func registerWithImports(files *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := files.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		if err := registerWithImports(files, imports.Get(i).FileDescriptor); err != nil {
			return err
		}
	}
	return files.RegisterFile(fd)
}

// reflectionStream is one ServerReflectionInfo stream of either version;
// requests and answers are v1 messages (v1alpha is the same on the wire).
type reflectionStream interface {
	Send(*rpb.ServerReflectionRequest) error
	Recv() (*rpb.ServerReflectionResponse, error)
}

// alphaStream speaks v1alpha with v1 messages.
type alphaStream struct {
	s rpbalpha.ServerReflection_ServerReflectionInfoClient
}

// Send sends a v1 request as its v1alpha twin.
func (a alphaStream) Send(req *rpb.ServerReflectionRequest) error {
	b, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	//lint:ignore SA1019 v1alpha is the fallback for servers without v1
	var out rpbalpha.ServerReflectionRequest
	if err := proto.Unmarshal(b, &out); err != nil {
		return err
	}
	return a.s.Send(&out)
}

// Recv reads a v1alpha answer as its v1 twin.
func (a alphaStream) Recv() (*rpb.ServerReflectionResponse, error) {
	resp, err := a.s.Recv()
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		return nil, err
	}
	var out rpb.ServerReflectionResponse
	return &out, proto.Unmarshal(b, &out)
}

// errNoReflection says that the server offers neither reflection version.
var errNoReflection = errors.New("the server does not offer server reflection (grpc.reflection.v1 or v1alpha)")

// reflect asks the server for its services and their descriptors by
// server reflection, v1 first, then v1alpha. only, when set, restricts
// the services to that one.
func reflect(ctx context.Context, conn *ggrpc.ClientConn, only string) (*source, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	version := "grpc.reflection.v1"
	var st reflectionStream
	v1, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	var services []string
	if err == nil {
		st = v1
		services, err = listServices(st)
	}
	if status.Code(err) == codes.Unimplemented {
		version = "grpc.reflection.v1alpha"
		var as rpbalpha.ServerReflection_ServerReflectionInfoClient
		as, err = rpbalpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		st = nil
		if err == nil {
			st = alphaStream{as}
			services, err = listServices(st)
		}
		if status.Code(err) == codes.Unimplemented {
			return nil, errNoReflection
		}
	}
	if err != nil {
		return nil, err
	}
	if only != "" {
		services = []string{only}
	}
	byName := map[string]*descriptorpb.FileDescriptorProto{}
	add := func(resp *rpb.ServerReflectionResponse, what string) error {
		if e := resp.GetErrorResponse(); e != nil {
			return fmt.Errorf("%s: %s (%s)", what, e.GetErrorMessage(), codes.Code(e.GetErrorCode()))
		}
		fds := resp.GetFileDescriptorResponse()
		if fds == nil {
			return fmt.Errorf("%s: the server answered with something else than file descriptors", what)
		}
		for _, b := range fds.GetFileDescriptorProto() {
			var fdp descriptorpb.FileDescriptorProto
			if err := proto.Unmarshal(b, &fdp); err != nil {
				return fmt.Errorf("%s: a file descriptor does not parse: %w", what, err)
			}
			if _, ok := byName[fdp.GetName()]; !ok {
				byName[fdp.GetName()] = &fdp
			}
		}
		return nil
	}
	var names []string
	for _, svc := range services {
		if skipService(svc) {
			continue
		}
		names = append(names, svc)
		resp, err := roundTrip(st, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: svc}})
		if err != nil {
			return nil, err
		}
		if err := add(resp, "service "+svc); err != nil {
			return nil, err
		}
	}
	// Ask for imports the server did not send along.
	for {
		var missing []string
		for _, fdp := range byName {
			for _, dep := range fdp.GetDependency() {
				if _, ok := byName[dep]; !ok {
					missing = append(missing, dep)
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		progress := false
		for _, dep := range missing {
			if _, ok := byName[dep]; ok {
				continue
			}
			resp, err := roundTrip(st, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: dep}})
			if err != nil {
				return nil, err
			}
			if resp.GetErrorResponse() != nil {
				if _, gerr := protoregistry.GlobalFiles.FindFileByPath(dep); gerr == nil {
					// buildFiles takes it from the linked-in descriptors.
					byName[dep] = nil
					continue
				}
			}
			if err := add(resp, "import "+dep); err != nil {
				return nil, err
			}
			progress = true
		}
		if !progress {
			break
		}
	}
	for name, fdp := range byName {
		if fdp == nil {
			delete(byName, name)
		}
	}
	files, err := buildFiles(byName)
	if err != nil {
		return nil, err
	}
	src := &source{files: files, origin: "server reflection (" + version + ")"}
	for _, name := range names {
		d, err := files.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			return nil, fmt.Errorf("service %s is not in the descriptors the server sent", name)
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			return nil, fmt.Errorf("%s is a %T, not a service", name, d)
		}
		src.services = append(src.services, sd)
	}
	return src, nil
}

// roundTrip sends one request and reads its answer. A stream the server
// already ended reports the server's status, not io.EOF.
func roundTrip(st reflectionStream, req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
	if err := st.Send(req); err != nil {
		if !errors.Is(err, io.EOF) {
			return nil, err
		}
		if _, err := st.Recv(); err != nil {
			return nil, err
		}
		return nil, io.ErrUnexpectedEOF
	}
	return st.Recv()
}

func listServices(st reflectionStream) ([]string, error) {
	resp, err := roundTrip(st, &rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{ListServices: "*"}})
	if err != nil {
		return nil, err
	}
	if e := resp.GetErrorResponse(); e != nil {
		return nil, status.Error(codes.Code(e.GetErrorCode()), e.GetErrorMessage())
	}
	var out []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		out = append(out, s.GetName())
	}
	return out, nil
}
