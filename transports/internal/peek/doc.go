// Package peek tells whether an idle pooled connection can carry the next
// call, without blocking: the tcp transport's connections and the HTTP
// clients' keep-alive ones.
package peek
