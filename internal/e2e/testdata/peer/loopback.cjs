// Preloaded (node --require) by the internal/e2e tests and benchmarks:
// server-everything listens with app.listen(PORT), which binds every
// interface. This makes a listen() call that names a port but no host bind
// 127.0.0.1 instead.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && /^\d+$/.test(String(args[0])) &&
      (args.length === 1 || typeof args[1] === "function")) {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
