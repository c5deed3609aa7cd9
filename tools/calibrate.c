#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  size_t N=1<<16, sz=N*4096; volatile char sink=0;
  // anon write fault
  for(int rep=0;rep<3;rep++){
  char*p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(p,sz,MADV_NOHUGEPAGE);
  double t0=now(); for(size_t i=0;i<N;i++) p[i*4096]=1; double t1=now();
  printf("anon write fault: %.0f ns\n",(t1-t0)/N);
  munmap(p,sz);
  p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(p,sz,MADV_NOHUGEPAGE);
  t0=now(); for(size_t i=0;i<N;i++) sink+=p[i*4096]; t1=now();
  printf("anon read (zero page) fault: %.0f ns\n",(t1-t0)/N);
  t0=now(); for(size_t i=0;i<N;i++) p[i*4096]=1; t1=now();
  printf("wp fault on zero page (alloc+zero): %.0f ns\n",(t1-t0)/N);
  munmap(p,sz);
  }
  // memset / memcpy 4K
  char*a=aligned_alloc(4096,1<<26),*b=aligned_alloc(4096,1<<26); memset(a,1,1<<26);memset(b,2,1<<26);
  double t0=now(); for(int r=0;r<4;r++) for(size_t i=0;i<(1<<26);i+=4096) memset(a+i,0,4096); double t1=now();
  printf("clear 4KiB (64MiB buffer): %.0f ns\n",(t1-t0)/(4*(1<<14)));
  t0=now(); for(int r=0;r<4;r++) for(size_t i=0;i<(1<<26);i+=4096) memcpy(a+i,b+i,4096); t1=now();
  printf("copy 4KiB (64MiB buffers): %.0f ns\n",(t1-t0)/(4*(1<<14)));
  // file page cache read fault
  int fd=open("/tmp/calib/f",O_RDWR|O_CREAT|O_TRUNC,0644); ftruncate(fd,sz); char*w=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); for(size_t i=0;i<N;i++) w[i*4096]=1; munmap(w,sz); fsync(fd);
  for(int rep=0;rep<3;rep++){
  char*r=mmap(0,sz,PROT_READ,MAP_PRIVATE,fd,0); madvise(r,sz,MADV_RANDOM); // no faultaround? MADV_RANDOM disables readahead not faultaround
  t0=now(); for(size_t i=0;i<N;i++) sink+=r[i*4096]; t1=now();
  printf("file read fault (cached, random advice): %.0f ns/page\n",(t1-t0)/N);
  munmap(r,sz);
  r=mmap(0,sz,PROT_READ,MAP_PRIVATE,fd,0);
  t0=now(); for(size_t i=0;i<N;i++) sink+=r[i*4096]; t1=now();
  printf("file read fault (cached, default: fault-around): %.0f ns/page\n",(t1-t0)/N);
  munmap(r,sz);
  }
  // syscall
  t0=now(); for(int i=0;i<1000000;i++) getppid(); t1=now(); printf("getppid syscall: %.0f ns\n",(t1-t0)/1e6);
  t0=now(); for(int i=0;i<100000;i++){ void*m=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); munmap(m,4096);} t1=now(); printf("mmap+munmap 4K: %.0f ns\n",(t1-t0)/1e5);
  return sink;
}
