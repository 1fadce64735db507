/* Runs a fixed Lua workload (recursion, tables, sorting, strings, closures) scaled by argv[1]. */
#include <stdio.h>
#include <stdlib.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

static const char *script =
  "local n = tonumber(...) or 1\n"
  "local function fib(k) if k < 2 then return k end return fib(k-1) + fib(k-2) end\n"
  "local acc = 0\n"
  "for round = 1, n do\n"
  "  acc = acc + fib(18)\n"
  "  local t = {}\n"
  "  local seed = round\n"
  "  for i = 1, 3000 do seed = (seed * 1103515245 + 12345) % 2147483648; t[i] = seed % 10007 end\n"
  "  table.sort(t)\n"
  "  acc = acc + t[1] + t[#t]\n"
  "  local parts = {}\n"
  "  for i = 1, 500 do parts[#parts+1] = string.format('%d:%x', i, t[i]) end\n"
  "  local s = table.concat(parts, ',')\n"
  "  local cnt = 0\n"
  "  for w in s:gmatch('%d+:') do cnt = cnt + 1 end\n"
  "  s = s:gsub('a', 'A')\n"
  "  acc = acc + cnt + #s\n"
  "  local words = {}\n"
  "  for i = 1, 2000 do local k = 'w' .. (t[i] % 97); words[k] = (words[k] or 0) + 1 end\n"
  "  for k, v in pairs(words) do if v % 2 == 0 then acc = acc + 1 end end\n"
  "  local function counter() local c = 0; return function() c = c + 1; return c end end\n"
  "  local f = counter(); for i = 1, 1000 do f() end; acc = acc + f()\n"
  "end\n"
  "print(string.format('lua workload rounds=%d checksum=%d', n, acc))\n";

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
