module github.com/attnlab/attnlab/docs/findings/spago

go 1.26.0

require github.com/nlpodyssey/spago v1.1.0

require github.com/google/flatbuffers v23.5.26+incompatible // indirect
