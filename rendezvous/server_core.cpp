#include "server_core.hpp"
