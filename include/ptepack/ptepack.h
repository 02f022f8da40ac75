// ptepack: write, read and check ExecuTorch .pte and .ptd files.
// The whole public API; each header can also be included on its own.
#pragma once

#include "ptepack/bytes.h"
#include "ptepack/config.h"
#include "ptepack/error.h"
#include "ptepack/package.h"
#include "ptepack/program_builder.h"
#include "ptepack/program_info.h"
#include "ptepack/reader.h"
#include "ptepack/repack.h"
#include "ptepack/scalar_type.h"
#include "ptepack/version.h"
#include "ptepack/writer.h"
