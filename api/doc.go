// Package api holds the request and response types of the LayerFS daemon's
// socket API — HTTP with JSON bodies on a unix socket — shared by the
// daemon (sessions), the Go client (package layerfs) and the CLI.
//
// Routes (method and path):
//
//	GET    /health                        daemon and Store status
//	GET    /metrics                       Prometheus text metrics
//	POST   /workspaces                    create a Workspace (CreateRequest)
//	GET    /workspaces                    list Workspaces
//	GET    /workspaces/{id}               inspect one (with its pending changes)
//	POST   /workspaces/{id}/exec          run a command (ExecRequest); ?stream=1 streams NDJSON ExecEvents
//	POST   /workspaces/{id}/commit        capture and publish (CommitRequest)
//	POST   /workspaces/{id}/discard       drop uncommitted changes, keeping ignored paths
//	                                      and special files (?all=1 drops them too)
//	DELETE /workspaces/{id}               end it (?discard=1 to drop uncommitted changes)
//
// Errors come back with a 4xx or 5xx status and an Error body whose Code
// names the kind of failure.
package api
