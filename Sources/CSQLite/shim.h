// SPDX-License-Identifier: Apache-2.0
#include <sqlite3.h>
