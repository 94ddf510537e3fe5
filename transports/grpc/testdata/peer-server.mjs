// A gRPC server built on @grpc/grpc-js, @grpc/proto-loader and
// @grpc/reflection (third-party implementations, pinned in peer/), serving
// calc.proto on 127.0.0.1 with server reflection (v1 and v1alpha). It
// prints {"port": N, "grpc_js_version": "..."} once listening.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const require = createRequire(import.meta.url);
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const { ReflectionService } = require("@grpc/reflection");

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDef = protoLoader.loadSync(path.join(here, "calc.proto"), { longs: String, enums: String, defaults: true });
const proto = grpc.loadPackageDefinition(pkgDef);

const server = new grpc.Server();
server.addService(proto.peer.v1.Calculator.service, {
  Add(call, cb) {
    cb(null, { sum: (BigInt(call.request.a) + BigInt(call.request.b)).toString() });
  },
  Count(call) {
    const n = call.request.n;
    for (let i = 1; i <= n; i++) call.write({ i, label: `#${i}` });
    call.end();
  },
  Echo(call, cb) {
    if (call.request.msg === "fail") {
      cb({ code: grpc.status.INVALID_ARGUMENT, details: "msg must not be fail" });
      return;
    }
    cb(null, { msg: call.request.msg });
  },
});
new ReflectionService(pkgDef).addToServer(server);

server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    console.error(err);
    process.exit(1);
  }
  const version = require("@grpc/grpc-js/package.json").version;
  console.log(JSON.stringify({ port, grpc_js_version: version }));
});
