/* The sleeping static process of the bare bwrap floor (benchmarks/density.py --floor):
 * nothing but a pause, so the floor counts the sandbox and not a program's libraries. */
#include <unistd.h>

int main(void) {
  for (;;)
    pause();
}
