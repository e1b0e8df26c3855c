package server

import "net/http"

// register mounts the network API's handlers on mux.
func (s *Server) register(mux *http.ServeMux) {}
