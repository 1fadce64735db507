/* Lua in phases, scaled by argv[1]: compile generated source (the parser), then compute
   (numeric loops, closures), then format text (string.format, concatenation, patterns). */
#include <stdio.h>
#include <stdlib.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

static const char *script =
  "local n = tonumber(...) or 1\n"
  "-- Phase 1: parse. Generate source text and compile it many times.\n"
  "local parts = {}\n"
  "for i = 1, 150 do parts[#parts+1] = string.format('local v%d = (%d * x + %d) %% 7 if v%d > 3 then y = y + v%d else y = y - 1 end', i, i, i*3, i, i) end\n"
  "local src = 'return function(x) local y = 0 ' .. table.concat(parts, ' ') .. ' return y end'\n"
  "local compiled = 0\n"
  "for i = 1, 60 * n do local f = assert(load(src)); compiled = compiled + 1 end\n"
  "-- Phase 2: compute.\n"
  "local acc = 0\n"
  "for r = 1, 60 * n do\n"
  "  for i = 1, 20000 do local x = (i * r) % 1009; acc = (acc + x * x - (x >> 2)) % 1000003 end\n"
  "end\n"
  "-- Phase 3: format.\n"
  "local out = 0\n"
  "for r = 1, 25 * n do\n"
  "  local t = {}\n"
  "  for i = 1, 2000 do t[#t+1] = string.format('%05d:%x:%s', i, i * r, tostring(i / 7)) end\n"
  "  local s = table.concat(t, ';')\n"
  "  local c = 0\n"
  "  for w in s:gmatch('%d+:') do c = c + 1 end\n"
  "  out = out + c + #s:upper()\n"
  "end\n"
  "print(string.format('lua phases: compiled %d, acc %d, out %d', compiled, acc, out))\n";

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (!L) return 1;
  luaL_openlibs(L);
  if (luaL_loadstring(L, script) != LUA_OK) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); return 1; }
  lua_pushstring(L, argc > 1 ? argv[1] : "1");
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); return 1; }
  lua_close(L);
  return 0;
}
