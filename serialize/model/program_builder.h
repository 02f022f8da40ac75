// ProgramBuilder is public: ptepack/program_builder.h.
#pragma once

#include "ptepack/program_builder.h"
#include "serialize/model/package.h"
