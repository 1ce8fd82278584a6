/* uname -m / -r as an emulated AArch64 process sees them (farm/virtual/qemu/build.py). */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

int main(int argc, char** argv) {
  struct utsname names;
  if (uname(&names) != 0) return 1;
  const char* flag = argc > 1 ? argv[1] : "-s";
  if (strcmp(flag, "-m") == 0) puts(names.machine);
  else if (strcmp(flag, "-r") == 0) puts(names.release);
  else if (strcmp(flag, "-n") == 0) puts(names.nodename);
  else puts(names.sysname);
  return 0;
}
