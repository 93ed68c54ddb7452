module github.com/attnlab/attnlab/adapters/spago

go 1.26.0

require (
	github.com/attnlab/attnlab v0.0.0
	github.com/nlpodyssey/spago v1.1.0
)

require (
	github.com/google/flatbuffers v23.5.26+incompatible // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/attnlab/attnlab => ../..
