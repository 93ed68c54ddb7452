module github.com/attnlab/attnlab/adapters/ggml

go 1.26.0

require (
	github.com/attnlab/attnlab v0.0.0-00010101000000-000000000000
	github.com/ollama/ollama v0.17.4
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/attnlab/attnlab => ../..
